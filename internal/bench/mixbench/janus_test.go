package mixbench

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/convene/convene/internal/audio"
)

// TestJanusAudioBridge: the benchmark's Janus peer mixes for plain RTP
// participants: in a room of a speaker and a silent member, the silent
// member receives the mix at 50 frames a second, so a report never shows
// AudioBridge losing for a setup fault of ours.
func TestJanusAudioBridge(t *testing.T) {
	if _, err := exec.LookPath("janus"); err != nil {
		t.Skip("janus is not installed (make bench installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := Codecs["g711"]
	m, err := startJanusMixer(ctx, Config{Tmp: t.TempDir()}, c)
	if err != nil {
		t.Fatal(err)
	}
	defer m.stop()
	load, err := NewLoad(memberBase, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer load.Close()
	voice, err := record(c, 440)
	if err != nil {
		t.Fatal(err)
	}
	ms := []*Member{load.NewMember(0, 0, true, voice, c.Spec.PT), load.NewMember(1, 0, false, voice, c.Spec.PT)}
	if err := m.addSession(ctx, 0, ms); err != nil {
		t.Fatalf("%v\n%s", err, m.j.Log())
	}
	var heard []int16
	load.tap = func(k int, p []byte) {
		if k == 1 {
			pcm := make([]int16, len(p))
			audio.DecodeMulaw(pcm, p)
			heard = append(heard, pcm...)
		}
	}
	window := 2 * time.Second
	rs, counts := load.Run(ctx, ms, c.Spec.Rate, time.Second, window)
	q := quality(rs[1:], window)
	t.Logf("sent %+v; the listener: %+v", counts, q)
	if q.ReceivedShare() < 0.9 {
		t.Fatalf("the silent member received %d of %d mixed frames\n%s", q.Received, q.Expected, m.j.Log())
	}
	if sh := audio.ToneShare(heard[len(heard)/2:], 440, 8000); sh < 0.25 {
		t.Errorf("440 Hz holds %.2f of what the silent member hears, want the speaker there", sh)
	}
}
