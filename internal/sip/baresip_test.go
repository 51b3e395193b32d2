package sip

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// baresipUA is a phone of these tests: testutil's baresip, registered
// here with a 440 Hz tone.
type baresipUA struct{ *testutil.Baresip }

func startBaresip(t *testing.T, ctx context.Context, user, proxy string, quitAfter time.Duration, extra ...string) *baresipUA {
	t.Helper()
	return &baresipUA{testutil.StartBaresip(t, ctx, testutil.BaresipConfig{User: user, Password: testPassword,
		Domain: "convene.test", Proxy: proxy, QuitAfter: quitAfter, Commands: extra})}
}

func (b *baresipUA) output() string { return b.Output() }

// decodedAudio returns, for every WAV file of received audio, the number
// of samples that are not silence.
func (b *baresipUA) decodedAudio(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, w := range b.Decoded(t) {
		loud := 0
		for _, v := range w.PCM {
			if v > 1000 || v < -1000 {
				loud++
			}
		}
		out[w.Name] = loud
	}
	return out
}

// TestBaresipCall: two real baresip phones register (digest auth) and
// alice calls bob through Convene and its relay; bob answers
// automatically. Each side's sine tone must arrive, decoded, at the other.
func TestBaresipCall(t *testing.T) {
	testutil.NeedBinary(t, "baresip")
	rl := newTestRelay(t)
	// baresip 1.0 (libre) fails with ENOSYS as soon as any challenge names
	// SHA-256, so this server offers MD5 alone (sip.algorithms: MD5).
	e := newTestEnv(t, func(o *Options) { o.Media = rl; o.Algorithms = []string{"MD5"} }, "alice", "bob")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	bob := startBaresip(t, ctx, "bob", e.srv.Addr(), 30*time.Second)
	testutil.WaitFor(t, 15*time.Second, "bob to register", func() bool { return len(e.srv.loc.lookup("bob", time.Now())) > 0 })
	alice := startBaresip(t, ctx, "alice", e.srv.Addr(), 8*time.Second, "/dial sip:bob@convene.test")
	testutil.WaitFor(t, 15*time.Second, "alice to register", func() bool { return len(e.srv.loc.lookup("alice", time.Now())) > 0 })
	testutil.WaitFor(t, 15*time.Second, "the call to be answered", func() bool {
		return counter(t, e.reg, "convene_sip_calls_total", map[string]string{"result": "answered"}) == 1
	})
	alice.Cmd.Wait()
	testutil.WaitFor(t, 10*time.Second, "the call to end", func() bool { return rl.Calls() == 0 })
	bob.Cmd.Process.Kill()
	bob.Cmd.Wait()

	for name, b := range map[string]*baresipUA{"alice": alice, "bob": bob} {
		got := b.decodedAudio(t)
		t.Logf("%s decoded audio (non-silent samples per file): %v", name, got)
		total := 0
		for _, n := range got {
			total += n
		}
		if total < 8000 {
			t.Errorf("%s received %d non-silent samples, want at least 1 s of the other side's tone", name, total)
		}
	}
	// Each phone only knows the relay's address (the SDP both got was
	// rewritten), so what they decoded went through it: ~50 packets/s each way.
	st := rl.Stats()
	t.Logf("relay: %d packets in, %d out", st.PacketsIn, st.PacketsOut)
	if st.PacketsOut < 200 {
		t.Errorf("relay forwarded %d packets, want at least 200 (2 s of 20 ms audio both ways)", st.PacketsOut)
	}
	if !strings.Contains(alice.output(), "Call established") && !strings.Contains(alice.output(), "established") {
		t.Errorf("alice's baresip never reported the call established")
	}
	if got := counter(t, e.reg, "convene_sip_challenges_total", nil); got < 3 {
		t.Errorf("challenges = %v, want at least 3 (two REGISTERs and the INVITE)", got)
	}
}
