package testutil

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Baresip is a headless baresip (a real SIP phone) with one account: a
// sine tone as its microphone, and its decoded audio written to WAV files
// by the sndfile module.
type Baresip struct {
	Dir  string
	Cmd  *exec.Cmd
	ctrl string // host:port of its ctrl_tcp module
	out  Buffer
}

// BaresipConfig is one phone.
type BaresipConfig struct {
	User, Password string
	Domain         string // of the account's address of record
	Proxy          string // host:port of the outbound proxy (the node)
	Tone           int    // Hz of the microphone's sine; 440 if 0
	Codecs         string // audio_codecs of the account; "PCMU" if ""
	QuitAfter      time.Duration
	Commands       []string // run at start (-e), e.g. "/dial sip:…"
}

func (b *Baresip) Write(p []byte) (int, error) { return b.out.Write(p) }

// Output is what baresip printed.
func (b *Baresip) Output() string { return b.out.String() }

// StartBaresip runs baresip with cfg; the test's end kills it.
func StartBaresip(t testing.TB, ctx context.Context, cfg BaresipConfig) *Baresip {
	t.Helper()
	bin := NeedBinary(t, "baresip")
	dir := t.TempDir()
	if cfg.Tone == 0 {
		cfg.Tone = 440
	}
	if cfg.Codecs == "" {
		cfg.Codecs = "PCMU"
	}
	// baresip also binds TLS on the SIP port + 1.
	sipPort := 20000 + 2*rand.IntN(4000)
	rtpBase := 30200 + 2*rand.IntN(4000)
	ctrlPort := 12000 + rand.IntN(4000)
	conf := fmt.Sprintf(`poll_method epoll
sip_listen 127.0.0.1:%d
audio_source ausine,%d
ausrc_srate 48000
ausrc_channels 2
audio_player aubridge,nowhere
audio_alert aubridge,nowhere
module_path /usr/lib/baresip/modules
module g711.so
module g722.so
module ausine.so
module aubridge.so
module sndfile.so
module_app account.so
module_app menu.so
module_app ctrl_tcp.so
ctrl_tcp_listen 127.0.0.1:%d
snd_path %s
rtp_ports %d-%d
net_interface 127.0.0.1
`, sipPort, cfg.Tone, ctrlPort, dir, rtpBase, rtpBase+20)
	acc := fmt.Sprintf(`<sip:%s@%s>;auth_pass=%s;outbound="sip:%s";regint=600;answermode=auto;audio_codecs=%s`+"\n",
		cfg.User, cfg.Domain, cfg.Password, cfg.Proxy, cfg.Codecs)
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "accounts"), []byte(acc), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"-f", dir, "-t", strconv.Itoa(int(cfg.QuitAfter / time.Second))}
	for _, e := range cfg.Commands {
		args = append(args, "-e", e)
	}
	b := &Baresip{Dir: dir, ctrl: fmt.Sprintf("127.0.0.1:%d", ctrlPort)}
	b.Cmd = exec.CommandContext(ctx, bin, args...)
	b.Cmd.Stdout, b.Cmd.Stderr = b, b
	b.Cmd.WaitDelay = 2 * time.Second
	if err := b.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b.Cmd.ProcessState == nil {
			b.Cmd.Process.Kill()
			b.Cmd.Wait()
		}
		if t.Failed() {
			t.Logf("baresip %s output:\n%s", cfg.User, b.Output())
		}
	})
	return b
}

// WAV is one file of decoded audio: 16-bit mono or the first channel.
type WAV struct {
	Name string
	Rate int
	PCM  []int16
}

// Decoded returns the audio the phone received and decoded, a file per
// call stream (sndfile names them …dec…wav).
func (b *Baresip) Decoded(t testing.TB) []WAV {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(b.Dir, "*dec*.wav"))
	var out []WAV
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil || len(data) <= 44 {
			out = append(out, WAV{Name: filepath.Base(f)})
			continue
		}
		channels := max(1, int(binary.LittleEndian.Uint16(data[22:])))
		w := WAV{Name: filepath.Base(f), Rate: int(binary.LittleEndian.Uint32(data[24:]))}
		pcm := data[44:]
		for i := 0; i+1 < len(pcm); i += 2 * channels {
			w.PCM = append(w.PCM, int16(binary.LittleEndian.Uint16(pcm[i:])))
		}
		out = append(out, w)
	}
	return out
}

// Command runs a command of baresip's menu (e.g. "sndcode" with "*" to
// press a key in the current call: an RFC 4733 event) through its
// ctrl_tcp module: a JSON object in a netstring, answered likewise.
func (b *Baresip) Command(command, params string) (string, error) {
	c, err := net.DialTimeout("tcp", b.ctrl, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	req, _ := json.Marshal(map[string]string{"command": command, "params": params, "token": "t"})
	if _, err := fmt.Fprintf(c, "%d:%s,", len(req), req); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	n, err := r.ReadString(':')
	if err != nil {
		return "", err
	}
	size, err := strconv.Atoi(strings.TrimSuffix(n, ":"))
	if err != nil || size < 0 || size > 1<<16 {
		return "", fmt.Errorf("baresip answered a netstring of length %q", n)
	}
	body := make([]byte, size+1)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	return string(body[:size]), nil
}
