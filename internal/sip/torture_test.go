package sip

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// recordingTx is a server transaction that records responses instead of
// sending them. It stands in for sipgo's transaction so the torture test
// can see which status each message gets; the same messages also go
// through the real transports in TestTortureOverTheWire.
type recordingTx struct {
	mu   sync.Mutex
	res  []*sip.Response
	done chan struct{}
}

func newRecordingTx() *recordingTx { return &recordingTx{done: make(chan struct{})} }

func (t *recordingTx) Respond(r *sip.Response) error {
	t.mu.Lock()
	t.res = append(t.res, r)
	t.mu.Unlock()
	return nil
}
func (t *recordingTx) Terminate()                         {}
func (t *recordingTx) OnTerminate(sip.FnTxTerminate) bool { return true }
func (t *recordingTx) Done() <-chan struct{}              { return t.done }
func (t *recordingTx) Err() error                         { return nil }
func (t *recordingTx) Acks() <-chan *sip.Request          { return nil }
func (t *recordingTx) OnCancel(sip.FnTxCancel) bool       { return true }

func (t *recordingTx) final() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.res {
		if r.StatusCode >= 200 {
			return r.StatusCode
		}
	}
	return 0
}

// tortureOutcome handles one message as the transports would: parse, then
// the method's handler. It returns the final status, or 0 when the message
// is dropped (unparsable, or a response).
func tortureOutcome(t testing.TB, e *testEnv, data []byte) (int, string) {
	msg, err := e.srv.parser.ParseSIP(data)
	if err != nil {
		return 0, "dropped: " + err.Error()
	}
	req, ok := msg.(*sip.Request)
	if !ok {
		return 0, "dropped: a response"
	}
	req.SetTransport("UDP")
	req.SetSource("127.0.0.1:5999")
	tx := newRecordingTx()
	e.srv.handlerFor(req.Method)(req, tx)
	code := tx.final()
	if code == 0 {
		return 0, "no final response"
	}
	return code, ""
}

// TestTorture runs the RFC 4475 torture messages (testdata/rfc4475). Each
// valid one must be handled (a final response that is not a syntax
// refusal); each invalid one must be dropped or refused with the 4xx/5xx
// the RFC's section on it calls for.
func TestTorture(t *testing.T) {
	e := newTestEnv(t, nil, "alice")
	valid, _ := filepath.Glob("testdata/rfc4475/valid/*.dat")
	invalid, _ := filepath.Glob("testdata/rfc4475/invalid/*.dat")
	if len(valid) < 10 || len(invalid) < 30 {
		t.Fatalf("torture messages missing: %d valid, %d invalid", len(valid), len(invalid))
	}
	// Two valid messages are responses (3.1.1.11 noreason, 3.1.1.12
	// unreason): handled means parsed as a response and passed on.
	responses := map[string]bool{"noreason": true, "unreason": true}
	for _, f := range valid {
		name := strings.TrimSuffix(filepath.Base(f), ".dat")
		data, _ := os.ReadFile(f)
		if responses[name] {
			msg, err := e.srv.parser.ParseSIP(data)
			res, ok := msg.(*sip.Response)
			if err != nil || !ok {
				t.Errorf("valid response %s: not parsed as a response: %v", name, err)
				continue
			}
			e.srv.unhandledResponse(res) // not ours: dropped without harm
			continue
		}
		code, why := tortureOutcome(t, e, data)
		t.Logf("valid   %-10s -> %d %s", name, code, why)
		if code == 0 || code == 400 || code == 505 {
			t.Errorf("valid %s: got %d %s, want it handled", name, code, why)
		}
	}
	// What the RFC expects of the invalid ones that a parser accepts.
	want := map[string]int{
		"badvers":    505, // 3.1.2.16: SIP/7.0
		"zeromf":     483, // 3.3.5 (as seen by a proxy): Max-Forwards 0
		"bext01":     420, // 3.3.2: Proxy-Require: unknown extension
		"unkscm":     416, // 3.3.15: unknown Request-URI scheme
		"unksm2":     400, // 3.3.16: REGISTER whose To is not a SIP URI
		"mismatch01": 400, // 3.1.2.18: CSeq method differs
	}
	for _, f := range invalid {
		name := strings.TrimSuffix(filepath.Base(f), ".dat")
		data, _ := os.ReadFile(f)
		code, why := tortureOutcome(t, e, data)
		t.Logf("invalid %-10s -> %d %s", name, code, why)
		if w, ok := want[name]; ok && code != w && code != 0 {
			t.Errorf("invalid %s: got %d, want %d or dropped", name, code, w)
			continue
		}
		if code >= 200 && code < 300 {
			t.Errorf("invalid %s: accepted with %d", name, code)
		}
	}
}

// TestTortureOverTheWire sends every torture message to a live server over
// UDP and over TCP; it must keep answering.
func TestTortureOverTheWire(t *testing.T) {
	e := newTestEnv(t, nil, "alice")
	files, _ := filepath.Glob("testdata/rfc4475/*/*.dat")
	udp, err := net.Dial("udp", e.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	for _, f := range files {
		data, _ := os.ReadFile(f)
		udp.Write(data)
		if c, err := net.Dial("tcp", e.srv.Addr()); err == nil {
			c.Write(data)
			c.Close()
		}
	}
	// The torture connections count against the per-IP cap (32) until
	// the server has read each one's close, which a busy machine may not
	// have done yet: a connection over the cap is closed at once. So TCP
	// gets 5 s to answer again.
	for _, network := range []string{"udp", "tcp"} {
		res := optionsPing(t, network, e.srv.Addr())
		for deadline := time.Now().Add(5 * time.Second); network == "tcp" && !strings.HasPrefix(res, "SIP/2.0 200") && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			res = optionsPing(t, network, e.srv.Addr())
		}
		if !strings.HasPrefix(res, "SIP/2.0 200") {
			t.Errorf("after the torture messages, OPTIONS over %s got %q", network, res)
		}
	}
}

// optionsPing sends an OPTIONS to the server itself and returns the first
// line of the answer.
func optionsPing(t *testing.T, network, addr string) string {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	la := c.LocalAddr().String()
	msg := "OPTIONS sip:" + addr + " SIP/2.0\r\nVia: SIP/2.0/" + strings.ToUpper(network) + " " + la +
		";branch=z9hG4bK-ping" + la + ";rport\r\nMax-Forwards: 70\r\nFrom: <sip:ping@127.0.0.1>;tag=p1\r\n" +
		"To: <sip:" + addr + ">\r\nCall-ID: ping-" + la + "\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n"
	c.Write([]byte(msg))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		return err.Error()
	}
	line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
	return line
}
