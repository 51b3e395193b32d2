package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/export"
	"github.com/convene/convene/internal/recorder"
)

const recordingsUsage = `usage: convene recordings export RID -o FILE [-format webm|ogg|wav] [config flags]

Exports a recording of this node's recordings directory (recording.dir,
else <data_dir>/recordings: -config FILE, CONVENE_* variables and the flags
of 'convene serve' select it) to one file: WebM (VP8 and Opus) for audio
and video, Ogg/Opus or WAV for the audio alone, with the streams in sync.
The format comes from -format, else from FILE's extension; -o - writes to
standard output. A progress bar goes to standard error. The node need not
run; a recording it is still writing is refused.
`

// recordingsCmd runs `convene recordings`.
func recordingsCmd(args, env []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, recordingsUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] != "export" {
		fmt.Fprintf(stderr, "convene recordings: unknown command %q\n%s", args[0], recordingsUsage)
		return 2
	}
	rest := args[1:]
	if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
		fmt.Fprintf(stderr, "convene recordings export: missing recording ID\n%s", recordingsUsage)
		return 2
	}
	rid, rest := rest[0], rest[1:]
	if !strings.HasPrefix(rid, "r_") || strings.ContainsAny(rid, `/\`) || rid == "r_" {
		fmt.Fprintf(stderr, "convene recordings export: %q is not a recording ID (r_…)\n", rid)
		return 2
	}
	out, rest, err := takeValue(rest, "o")
	if err == nil && out == "" {
		err = errors.New("missing -o FILE")
	}
	var format string
	if err == nil {
		format, rest, err = takeValue(rest, "format")
	}
	if err != nil {
		fmt.Fprintf(stderr, "convene recordings export: %v\n%s", err, recordingsUsage)
		return 2
	}
	if format == "" {
		format = strings.TrimPrefix(filepath.Ext(out), ".")
	}
	f, err := export.ParseFormat(format)
	if err != nil {
		fmt.Fprintln(stderr, "convene recordings export:", err)
		return 2
	}
	cfg, pos, err := config.Load("", env, rest)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, recordingsUsage)
		config.PrintFlags(stdout)
		return 0
	}
	if err == nil && len(pos) > 0 {
		err = fmt.Errorf("unexpected arguments %q", pos)
	}
	if err != nil {
		fmt.Fprintln(stderr, "convene recordings export:", err)
		return 2
	}
	dir := filepath.Join(cfg.Resolved().RecordingDir(), rid)
	m, err := recorder.ReadManifest(dir)
	if err != nil {
		fmt.Fprintln(stderr, "convene recordings export:", err)
		return 1
	}
	if m.State == recorder.StateRecording {
		fmt.Fprintf(stderr, "convene recordings export: %s is still being written (or its node died: starting the node repairs it)\n", rid)
		return 1
	}
	rec, err := export.Open(dir)
	if err != nil {
		fmt.Fprintln(stderr, "convene recordings export:", err)
		return 1
	}
	var w io.Writer = stdout
	var file *os.File
	if out != "-" {
		if file, err = os.Create(out); err != nil {
			fmt.Fprintln(stderr, "convene recordings export:", err)
			return 1
		}
		w = file
	}
	bar := progressBar(stderr)
	err = rec.Write(w, f, bar)
	if file != nil {
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(out)
		}
	}
	fmt.Fprintln(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "convene recordings export:", err)
		return 1
	}
	fmt.Fprintf(stderr, "%s: %s, %v, %d audio and %d video streams\n", out, f, rec.Duration.Round(time.Millisecond), len(rec.Audio), len(rec.Video))
	return 0
}

// takeValue removes "-name VALUE" or "-name=VALUE" (one or two dashes)
// from args.
func takeValue(args []string, name string) (string, []string, error) {
	var rest []string
	var v string
	for i := 0; i < len(args); i++ {
		a := strings.TrimPrefix(strings.TrimPrefix(args[i], "-"), "-")
		switch {
		case a == name && args[i] != a:
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("-%s needs a value", name)
			}
			v = args[i+1]
			i++
		case strings.HasPrefix(a, name+"=") && args[i] != a:
			v = a[len(name)+1:]
		default:
			rest = append(rest, args[i])
		}
	}
	return v, rest, nil
}

// progressBar draws "[#####-----]  50%  0:30 / 1:00" on w, redrawn in place.
func progressBar(w io.Writer) export.Progress {
	const width = 30
	return func(done, total time.Duration) {
		frac := 1.0
		if total > 0 {
			frac = min(1, float64(done)/float64(total))
		}
		n := int(frac * width)
		fmt.Fprintf(w, "\r[%s%s] %3d%%  %s / %s", strings.Repeat("#", n), strings.Repeat("-", width-n),
			int(frac*100), clock(done), clock(total))
	}
}

func clock(d time.Duration) string {
	s := int(d.Seconds())
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}
