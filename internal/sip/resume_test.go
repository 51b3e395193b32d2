package sip

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
)

// dialIn makes phone p join s_live on e (authenticated) and returns the
// 2xx and the dialog the conference was given to keep.
func dialIn(t *testing.T, e *testEnv, conf *confRecorder, p *phone, callID string) (*sip.Response, Dialog) {
	t.Helper()
	uri := "sip:s_live@convene.test"
	p.invite(uri, callID, "z9hG4bK"+callID+"a", "")
	r := p.await(false)
	chs := challenges(r, "Proxy-Authenticate")
	if r.StatusCode != 407 || len(chs) == 0 {
		t.Fatalf("INVITE: %d, want 407", r.StatusCode)
	}
	p.invite(uri, callID, "z9hG4bK"+callID+"b", authorization("Proxy-Authorization", chs[0].algorithm, p.user, testPassword, chs[0], "INVITE", uri, 1))
	ok := p.await(false)
	if ok.StatusCode != 200 {
		t.Fatalf("authenticated INVITE: %d", ok.StatusCode)
	}
	var kept []Dialog
	for end := time.Now().Add(5 * time.Second); len(kept) == 0 && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		conf.mu.Lock()
		kept = append([]Dialog(nil), conf.kept...)
		conf.mu.Unlock()
	}
	if len(kept) != 1 {
		t.Fatalf("dialogs kept: %d, want 1", len(kept))
	}
	return ok, kept[0]
}

// TestResumeTakesTheCallOver: a phone dials into a session on node A; its
// dialog, as A kept it, survives a round trip through JSON; node B resumes
// it: the phone gets a re-INVITE in the same dialog (Call-ID, both tags,
// a CSeq past A's), with B's Contact and an offer of the same stream at
// B's media address in the next SDP version; it answers 200 and gets the
// ACK; its BYE to B is answered and leaves B's call; B keeps the dialog
// as it is now.
func TestResumeTakesTheCallOver(t *testing.T) {
	confA, confB := &confRecorder{}, &confRecorder{}
	a := newTestEnv(t, func(o *Options) { o.Conferences = confA }, "alice")
	b := startTestEnv(t, a.dsn, false, func(o *Options) { o.Conferences = confB })
	p := newPhone(t, "alice", a.srv.Addr())
	ok, kept := dialIn(t, a, confA, p, "resume1")
	d, err := ParseDialog(kept.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	ourTag, _ := ok.To().Params.Get("tag")
	if d.CallID != "resume1" || d.OurTag != ourTag || d.TheirTag != "caller1" || d.Addr != p.addr() || d.Transport != "udp" || d.SDPVersion != 1 {
		t.Fatalf("kept dialog %+v, the 2xx To tag %q", d, ourTag)
	}
	var (
		mu     sync.Mutex
		invite *sip.Request
		acked  bool
	)
	p.mu.Lock()
	p.handler = func(req *sip.Request) []string {
		mu.Lock()
		defer mu.Unlock()
		switch req.Method {
		case sip.INVITE:
			invite = req
			body := "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 49170 RTP/AVP 0\r\n"
			res := sip.NewResponseFromRequest(req, 200, "OK", []byte(body))
			res.AppendHeader(sip.NewHeader("Contact", "<sip:alice@"+p.addr()+">"))
			res.AppendHeader(sip.NewHeader("Content-Type", "application/sdp"))
			return []string{res.String()}
		case sip.ACK:
			acked = true
		}
		return nil
	}
	p.mu.Unlock()
	var left atomic.Int32 // BYE leaves on the server's goroutine
	var keptB []Dialog
	err = b.srv.Resume(context.Background(), d, func(say func(string) error) (netip.AddrPort, ConferenceCall, error) {
		return netip.MustParseAddrPort("127.0.0.1:40002"), ConferenceCall{
			Leave: func() { left.Add(1) },
			Keep:  func(d Dialog) { keptB = append(keptB, d) },
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	inv := invite
	mu.Unlock()
	if inv == nil {
		t.Fatal("Resume returned without a re-INVITE reaching the phone")
	}
	from, _ := inv.From().Params.Get("tag")
	to, _ := inv.To().Params.Get("tag")
	if string(*inv.CallID()) != "resume1" || from != ourTag || to != "caller1" {
		t.Errorf("re-INVITE outside the dialog: Call-ID %s, From tag %s, To tag %s", *inv.CallID(), from, to)
	}
	if inv.CSeq().SeqNo <= d.CSeq+resumeCSeqStep {
		t.Errorf("re-INVITE CSeq %d, want past %d", inv.CSeq().SeqNo, d.CSeq+resumeCSeqStep)
	}
	if c := inv.Contact(); c == nil || c.Address.Host+":"+strconv.Itoa(c.Address.Port) != b.srv.Addr() || c.Address.User != "s_live" {
		t.Errorf("re-INVITE's Contact %v, want the session at node B %s", inv.Contact(), b.srv.Addr())
	}
	body := string(inv.Body())
	if !strings.Contains(body, "m=audio 40002 RTP/AVP 0") || !strings.Contains(body, " "+strconv.FormatUint(d.SDPID, 10)+" 2 IN IP4") {
		t.Errorf("re-INVITE offer is not the stream at node B in SDP version 2:\n%s", body)
	}
	done := false
	for end := time.Now().Add(5 * time.Second); !done && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		done = acked
		mu.Unlock()
	}
	if !done {
		t.Error("the phone's 200 was not acknowledged")
	}
	if len(keptB) != 1 || keptB[0].SDPVersion != 2 || keptB[0].CSeq != inv.CSeq().SeqNo {
		t.Errorf("node B kept %+v, want the dialog at SDP version 2 and the re-INVITE's CSeq", keptB)
	}
	// The phone hangs up where the re-INVITE's Contact said: node B.
	p.server, _ = net.ResolveUDPAddr("udp", b.srv.Addr())
	p.send("BYE " + inv.Contact().Address.String() + " SIP/2.0\r\nVia: SIP/2.0/UDP " + p.addr() + ";branch=z9hG4bKbye;rport\r\n" +
		"Max-Forwards: 70\r\nFrom: <sip:alice@convene.test>;tag=caller1\r\nTo: <sip:s_live@convene.test>;tag=" + ourTag + "\r\n" +
		"Call-ID: resume1\r\nCSeq: 3 BYE\r\nContent-Length: 0\r\n\r\n")
	if r := p.await(false); r.StatusCode != 200 {
		t.Fatalf("BYE to node B: %d", r.StatusCode)
	}
	if n := left.Load(); n != 1 {
		t.Errorf("node B's call left %d times after the BYE, want 1", n)
	}
	if v := counter(t, b.reg, "convene_sip_calls_total", map[string]string{"result": "conference_resumed"}); v != 1 {
		t.Errorf("resumed calls %v, want 1", v)
	}
}

// TestResumeRefusedLeaves: a phone that answers the re-INVITE 481 (it
// hung up meanwhile) is not taken over: ErrNotResumed, and the call set
// up for it leaves.
func TestResumeRefusedLeaves(t *testing.T) {
	confA := &confRecorder{}
	a := newTestEnv(t, func(o *Options) { o.Conferences = confA }, "alice")
	b := startTestEnv(t, a.dsn, false, func(o *Options) { o.Conferences = &confRecorder{} })
	p := newPhone(t, "alice", a.srv.Addr())
	_, d := dialIn(t, a, confA, p, "resume2")
	p.mu.Lock()
	p.handler = func(req *sip.Request) []string {
		if req.Method == sip.INVITE {
			return []string{sip.NewResponseFromRequest(req, 481, "Call/Transaction Does Not Exist", nil).String()}
		}
		return nil
	}
	p.mu.Unlock()
	left := 0
	err := b.srv.Resume(context.Background(), d, func(func(string) error) (netip.AddrPort, ConferenceCall, error) {
		return netip.MustParseAddrPort("127.0.0.1:40002"), ConferenceCall{Leave: func() { left++ }}, nil
	})
	if !errors.Is(err, ErrNotResumed) {
		t.Fatalf("Resume of a call the phone refused: %v, want ErrNotResumed", err)
	}
	if left != 1 {
		t.Errorf("the call left %d times, want 1", left)
	}
	if _, ok := b.srv.conf.get("resume2"); ok {
		t.Error("node B answers in a call it did not take over")
	}
}

// FuzzParseDialog: a stored dialog never panics the parser, and what it
// accepts survives another round trip unchanged.
func FuzzParseDialog(f *testing.F) {
	offer := "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 49170 RTP/AVP 0\r\n"
	f.Add(Dialog{CallID: "c1", Session: "s_1", OurTag: "a", TheirTag: "b", Remote: "sip:alice@convene.test",
		Target: "sip:alice@127.0.0.1:5070", Transport: "udp", Addr: "127.0.0.1:5070", CSeq: 100,
		Offer: []byte(offer), SDPID: 7, SDPVersion: 1}.Marshal())
	f.Add([]byte(`{"call_id":"x","our_tag":"y","session":"s","target":"sip:@","remote":"<>","transport":"udp","addr":"1.2.3.4:5"}`))
	f.Add([]byte(`{"offer":"dj0w"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDialog(b)
		if err != nil {
			return
		}
		again, err := ParseDialog(d.Marshal())
		if err != nil {
			t.Fatalf("an accepted dialog did not parse again: %v", err)
		}
		if string(again.Marshal()) != string(d.Marshal()) {
			t.Fatalf("round trip changed the dialog:\n%s\n%s", d.Marshal(), again.Marshal())
		}
		if _, err := CallerOf(d); err != nil {
			t.Fatalf("an accepted dialog has no caller: %v", err)
		}
	})
}

// TestLetGoForgetsTheCall: a call another node took over is let go here:
// what was held for it is dropped without its member leaving, and the
// phone's BYE to this node finds no call (refused: the proxy routes it
// as any in-dialog request it has no call for, 404).
func TestLetGoForgetsTheCall(t *testing.T) {
	conf := &confRecorder{}
	a := newTestEnv(t, func(o *Options) { o.Conferences = conf }, "alice")
	p := newPhone(t, "alice", a.srv.Addr())
	ok, _ := dialIn(t, a, conf, p, "letgo1")
	dropped := 0
	call, _ := a.srv.conf.get("letgo1")
	call.Drop = func() { dropped++ }
	a.srv.conf.add("letgo1", call)
	if !a.srv.LetGo("letgo1") || a.srv.LetGo("letgo1") {
		t.Fatal("LetGo: want true once, then false")
	}
	if _, left := conf.state(); dropped != 1 || left != 0 {
		t.Fatalf("dropped %d, left %d: want dropped once and the member kept", dropped, left)
	}
	p.send("BYE " + ok.Contact().Address.String() + " SIP/2.0\r\nVia: SIP/2.0/UDP " + p.addr() + ";branch=z9hG4bKlgbye;rport\r\n" +
		"Max-Forwards: 70\r\nFrom: <sip:alice@convene.test>;tag=caller1\r\nTo: " + ok.To().Value() + "\r\n" +
		"Call-ID: letgo1\r\nCSeq: 3 BYE\r\nContent-Length: 0\r\n\r\n")
	if r := p.await(false); r.StatusCode/100 != 4 {
		t.Fatalf("BYE in a call let go: %d, want it refused", r.StatusCode)
	}
	if v := counter(t, a.reg, "convene_sip_calls_total", map[string]string{"result": "conference_let_go"}); v != 1 {
		t.Errorf("calls let go %v, want 1", v)
	}
}
