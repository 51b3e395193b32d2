package sip

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// baresipUA is a headless baresip (the real SIP phone) with one account,
// a 440 Hz sine as its microphone and its decoded audio dumped to WAV
// files by the sndfile module.
type baresipUA struct {
	dir string
	cmd *exec.Cmd
	mu  sync.Mutex
	out bytes.Buffer
}

func (b *baresipUA) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.Write(p)
}

func (b *baresipUA) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.String()
}

// startBaresip runs baresip for user, registering with the server at
// proxy; extra are commands run at start (-e).
func startBaresip(t *testing.T, ctx context.Context, user, proxy string, quitAfter time.Duration, extra ...string) *baresipUA {
	t.Helper()
	bin := testutil.NeedBinary(t, "baresip")
	dir := t.TempDir()
	// baresip also binds TLS on the SIP port + 1.
	sipPort := 20000 + 2*rand.IntN(4000)
	rtpBase := 30200 + 2*rand.IntN(4000)
	cfg := fmt.Sprintf(`poll_method epoll
sip_listen 127.0.0.1:%d
audio_source ausine,440
ausrc_srate 48000
ausrc_channels 2
audio_player aubridge,nowhere
audio_alert aubridge,nowhere
module_path /usr/lib/baresip/modules
module g711.so
module ausine.so
module aubridge.so
module sndfile.so
module_app account.so
module_app menu.so
snd_path %s
rtp_ports %d-%d
net_interface 127.0.0.1
`, sipPort, dir, rtpBase, rtpBase+20)
	acc := fmt.Sprintf(`<sip:%s@convene.test>;auth_pass=%s;outbound="sip:%s";regint=600;answermode=auto;audio_codecs=PCMU`+"\n",
		user, testPassword, proxy)
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "accounts"), []byte(acc), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-f", dir, "-t", strconv.Itoa(int(quitAfter / time.Second))}
	for _, e := range extra {
		args = append(args, "-e", e)
	}
	b := &baresipUA{dir: dir}
	b.cmd = exec.CommandContext(ctx, bin, args...)
	b.cmd.Stdout, b.cmd.Stderr = b, b
	b.cmd.WaitDelay = 2 * time.Second
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b.cmd.ProcessState == nil {
			b.cmd.Process.Kill()
			b.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("baresip %s output:\n%s", user, b.output())
		}
	})
	return b
}

// decodedAudio returns, for every WAV file sndfile wrote for decoded
// (received) audio, the number of samples that are not silence.
func (b *baresipUA) decodedAudio(t *testing.T) map[string]int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(b.dir, "*dec*.wav"))
	out := map[string]int{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(data) <= 44 {
			out[filepath.Base(f)] = 0
			continue
		}
		loud := 0
		pcm := data[44:]
		for i := 0; i+1 < len(pcm); i += 2 {
			v := int16(binary.LittleEndian.Uint16(pcm[i:]))
			if v > 1000 || v < -1000 {
				loud++
			}
		}
		out[filepath.Base(f)] = loud
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
	alice.cmd.Wait()
	testutil.WaitFor(t, 10*time.Second, "the call to end", func() bool { return rl.Calls() == 0 })
	bob.cmd.Process.Kill()
	bob.cmd.Wait()

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
