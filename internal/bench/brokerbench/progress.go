package brokerbench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress is a one-line terminal progress bar for a run with a time
// budget. On a terminal each Step redraws the line in place; elsewhere (CI,
// a file) each Step prints a line of its own.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	total time.Duration
	tty   bool
	start time.Time
	now   func() time.Time
	width int // cells of the bar
}

// NewProgress returns a bar over total (the run's expected duration); tty
// selects in-place redraws.
func NewProgress(w io.Writer, total time.Duration, tty bool) *Progress {
	return &Progress{w: w, total: total, tty: tty, start: time.Now(), now: time.Now, width: 20}
}

// IsTTY reports whether f is a terminal (a character device).
func IsTTY(f *os.File) bool {
	if f == nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	return fi.Mode()&os.ModeCharDevice != 0
}

// Step shows that the run is at done of its total and now doing label.
// done ≤ 0 means the time since NewProgress.
func (p *Progress) Step(label string, done time.Duration) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if done <= 0 {
		done = p.now().Sub(p.start)
	}
	line := p.line(label, done, false)
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

// Done draws the bar full and ends its line, so that what is printed next
// starts on a line of its own.
func (p *Progress) Done(label string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	line := p.line(label, p.now().Sub(p.start), true)
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K\n", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *Progress) line(label string, done time.Duration, finished bool) string {
	frac := 1.0
	if p.total > 0 {
		frac = float64(done) / float64(p.total)
	}
	frac = min(max(frac, 0), 1)
	pct := int(frac * 100)
	if !finished && pct > 99 {
		pct = 99 // the budget is an estimate: 100 % only when done
	}
	if finished {
		frac, pct = 1, 100
	}
	filled := int(frac * float64(p.width))
	if !finished && filled >= p.width && pct < 100 {
		filled = p.width - 1
	}
	bar := strings.Repeat("#", filled) + strings.Repeat(".", p.width-filled)
	var when string
	switch left := p.total - done; {
	case finished:
		when = "done in " + roundDur(done).String()
	case left >= 0:
		when = roundDur(left).String() + " left"
	default:
		when = roundDur(-left).String() + " over"
	}
	s := fmt.Sprintf("[%s] %3d%% %s", bar, pct, when)
	if label != "" {
		s += "  " + label
	}
	return s
}

func roundDur(d time.Duration) time.Duration { return d.Round(time.Second) }
