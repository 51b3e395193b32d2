package brokerbench

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestProgressNonTTY(t *testing.T) {
	var b strings.Builder
	p := NewProgress(&b, 10*time.Minute, false)
	p.Step("single-audio convene n=3000", 4*time.Minute+12*time.Second)
	p.Step("single-audio nats-server n=1000", 5*time.Minute)
	p.Step("multi-video convene n=40", 11*time.Minute) // over the estimate
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	want := []string{
		"[########............]  42% 5m48s left  single-audio convene n=3000",
		"[##########..........]  50% 5m0s left  single-audio nats-server n=1000",
		"[###################.]  99% 1m0s over  multi-video convene n=40",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], want[i])
		}
	}
	if strings.Contains(b.String(), "\r") {
		t.Error("carriage return without a TTY")
	}
}

func TestProgressTTY(t *testing.T) {
	var b strings.Builder
	p := NewProgress(&b, time.Minute, true)
	base := p.start
	p.now = func() time.Time { return base.Add(15 * time.Second) }
	p.Step("a", 0) // 0: the time since NewProgress
	p.Step("b", 30*time.Second)
	p.Done("finished")
	out := b.String()
	if strings.Count(out, "\r") != 3 || strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Errorf("want three in-place redraws and one final newline, got %q", out)
	}
	for _, want := range []string{" 25% 45s left  a", " 50% 30s left  b", "[####################] 100% done in 15s  finished"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q: %q", want, out)
		}
	}
	var nilP *Progress
	nilP.Step("ignored", time.Second) // a nil bar is a no-op
	nilP.Done("")
}

func TestIsTTY(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTTY(f) {
		t.Error("a regular file is a TTY")
	}
	if IsTTY(nil) {
		t.Error("nil is a TTY")
	}
}
