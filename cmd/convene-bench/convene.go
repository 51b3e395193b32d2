package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// conveneFlag defines the -convene flag every benchmark has.
func conveneFlag(fs *flag.FlagSet) *string {
	return fs.String("convene", "", "the convene server `binary` to run (default: convene beside this executable, else on PATH)")
}

// findConvene returns the absolute path of the server binary the
// benchmarks run as child processes: path when given, else `convene` in the
// directory of self (this executable; make build puts both in bin/), else
// `convene` on PATH. The binary must answer `version` as the server does,
// so that a wrong file is refused before a benchmark measures it.
func findConvene(path, self string) (string, error) {
	if path == "" {
		beside := filepath.Join(filepath.Dir(self), "convene")
		if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() {
			path = beside
		} else if p, err := exec.LookPath("convene"); err == nil {
			path = p
		} else {
			return "", errors.New("no convene binary beside this one or on PATH: run make build, or pass -convene PATH")
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	out, err := exec.Command(abs, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "convene ") {
		return "", fmt.Errorf("%s is not a convene server binary (`version` printed %q, error %v)", abs, strings.TrimSpace(string(out)), err)
	}
	return abs, nil
}

// conveneBin resolves the -convene flag for the benchmark cmd, printing why
// not and returning "" on failure.
func conveneBin(cmd, path string, stderr io.Writer) string {
	self, err := os.Executable()
	if err != nil && path == "" {
		fmt.Fprintf(stderr, "convene-bench %s: %v\n", cmd, err)
		return ""
	}
	bin, err := findConvene(path, self)
	if err != nil {
		fmt.Fprintf(stderr, "convene-bench %s: %v\n", cmd, err)
		return ""
	}
	return bin
}

// parseFlags parses a command's flags; done says the command ends there,
// with code: 0 after -h, 2 for a bad flag (the flag package said why).
func parseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, true
		}
		return 2, true
	}
	return 0, false
}
