package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/bench/proc"
)

// serverBin builds the real server binary once for the tests that run it.
var serverBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "convene-bench-test-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "convene")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/convene/convene/cmd/convene").CombinedOutput(); err != nil {
		return "", &buildError{err, out}
	}
	return bin, nil
})

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + string(e.out) }

func TestMain(m *testing.M) {
	code := m.Run()
	if bin, err := serverBin(); err == nil {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

func needServer(t *testing.T) string {
	t.Helper()
	bin, err := serverBin()
	if err != nil {
		t.Fatalf("building convene: %v", err)
	}
	return bin
}

func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "usage") {
		t.Errorf("no args: %d %q", code, errb.String())
	}
	if code := run([]string{"serve"}, &out, &errb); code != 2 {
		t.Errorf("serve is the server's, not the tooling's: exit %d", code)
	}
	// Each benchmark answers -h under its name and under the name it had
	// as a convene subcommand, without starting anything.
	for _, cmd := range []string{"broker", "bench", "floor", "bench-floor", "sip", "bench-sip", "relay", "bench-relay", "load", "overload"} {
		errb.Reset()
		if code := run([]string{cmd, "-h"}, &out, &errb); code != 0 {
			t.Errorf("%s -h: exit %d %q", cmd, code, errb.String())
		}
	}
	out.Reset()
	if code := run([]string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "convene-bench ") {
		t.Errorf("version: %d %q", code, out.String())
	}
}

// TestFindConvene: the benchmarks find the server beside this executable
// (bin/convene next to bin/convene-bench), take an explicit path, and
// refuse a file that is not the server.
func TestFindConvene(t *testing.T) {
	bin := needServer(t)
	dir := filepath.Dir(bin)
	t.Setenv("PATH", t.TempDir()) // no convene on PATH

	got, err := findConvene("", filepath.Join(dir, "convene-bench"))
	if err != nil || got != bin {
		t.Errorf("beside this executable: %q, %v; want %q", got, err, bin)
	}
	if got, err := findConvene(bin, "/nowhere/convene-bench"); err != nil || got != bin {
		t.Errorf("explicit path: %q, %v", got, err)
	}
	if _, err := findConvene("", "/nowhere/convene-bench"); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("none anywhere: %v; want a hint to make build", err)
	}
	// Not the server: a program that prints something else for `version`.
	fake := filepath.Join(t.TempDir(), "convene")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho convene-bench dev\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := findConvene("", filepath.Join(filepath.Dir(fake), "convene-bench")); err == nil || !strings.Contains(err.Error(), "not a convene server") {
		t.Errorf("a wrong file beside this executable: %v; want a refusal", err)
	}
	var errb bytes.Buffer
	if code := run([]string{"floor", "-convene", fake}, &bytes.Buffer{}, &errb); code != 1 || !strings.Contains(errb.String(), "not a convene server") {
		t.Errorf("floor -convene <not the server>: exit %d %q; want 1 before any measuring", code, errb.String())
	}
}

// TestLoad: `convene-bench load` drives a real running node with its key,
// and refuses without one instead of failing on the first link.
func TestLoad(t *testing.T) {
	bin := needServer(t)
	cmd := exec.Command(bin, "serve", "-config", "../../config/convene.sample.yaml",
		"-http-addr", "127.0.0.1:0", "-rtp-port", "0", "-sip-listen", "127.0.0.1:0", "-data-dir", t.TempDir())
	cmd.Env = append(os.Environ(), "CONVENE_AUTH_API_KEYS=load-test-key")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer proc.Stop(cmd, 10*time.Second)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no URL printed: %v\n%s", err, stderr.String())
	}
	url := regexp.MustCompile(`http://[0-9.:]+`).FindString(line)
	if url == "" {
		t.Fatalf("no URL in %q", line)
	}

	var lout, lerr bytes.Buffer
	if code := run([]string{"load", "-url", url, "-listeners", "5", "-duration", "4s", "-api-key", "load-test-key"}, &lout, &lerr); code != 0 {
		t.Fatalf("load: exit %d\n%s%s", code, lout.String(), lerr.String())
	}
	if !strings.Contains(lout.String(), "audio: first") || !strings.Contains(lout.String(), "quality bar") {
		t.Errorf("load printed:\n%s", lout.String())
	}
	t.Setenv("CONVENE_API_KEY", "")
	lerr.Reset()
	if code := run([]string{"load", "-url", url, "-listeners", "5", "-duration", "1s"}, &lout, &lerr); code != 2 || !strings.Contains(lerr.String(), "API key") {
		t.Errorf("load without a key: exit %d, %q; want 2 and a word about the key", code, lerr.String())
	}
}

// TestServerCarriesNoTooling runs scripts/check-deps.sh (make vet runs it)
// on the built server, whose modules must hold no plotting library, and on
// this binary's package, which does and must be refused.
func TestServerCarriesNoTooling(t *testing.T) {
	bin := needServer(t)
	out, err := exec.Command("../../scripts/check-deps.sh", bin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "no benchmark tooling") {
		t.Errorf("the server binary: %v\n%s", err, out)
	}
	out, err = exec.Command("../../scripts/check-deps.sh", "./cmd/convene-bench").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "gonum.org/v1/plot") || !strings.Contains(string(out), "internal/bench/brokerbench") {
		t.Errorf("the tooling passed the check: %v\n%s", err, out)
	}
}
