package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/audio"
	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/testutil"
)

// sdpAudio are the audio addresses ("ip:port", from c= and m=audio) of
// the SDP bodies in a SIPp message trace, in order.
func sdpAudio(trace string) []string {
	var out []string
	re := regexp.MustCompile(`(?m)^\s*c=IN IP4 ([0-9.]+)\s*$[\s\S]*?^\s*m=audio ([0-9]+) `)
	for _, m := range re.FindAllStringSubmatch(trace, -1) {
		out = append(out, net.JoinHostPort(m[1], m[2]))
	}
	return out
}

// TestPhoneCallTakenOverAfterKill9: three nats-servers, PostgreSQL, node B
// in process (it owns the session, where Ada speaks 440 Hz) and node A, a
// child process. A SIPp phone dials the session through A; its media are
// the test's socket, which speaks 1 kHz to where A's answer said and hears
// Ada in its mix. A is killed with SIGKILL. B re-INVITEs the phone in the
// same dialog with B's own media address; the phone answers, and from
// then on its media go to B: it hears Ada through B's mix and B hears it.
// It hangs up through B (BYE answered 200 where A is dead), its member
// leaves and the catalog forgets the call.
func TestPhoneCallTakenOverAfterKill9(t *testing.T) {
	testutil.NeedBinary(t, "sipp")
	if os.Getenv(childNodeEnv) != "" {
		t.Skip("in the child")
	}
	domain := func(cfg *config.Config) { cfg.SIP.Domain = "convene.test" }
	c := startCluster(t)
	b := c.start(t, "node-b", domain)
	c.nodes = append(c.nodes, b)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := b.sipUsers.Add(ctx, "carol", carolPass); err != nil {
		t.Fatal(err)
	}
	a := startChildNode(t, c.config(t, "node-a", domain))
	s := createSession(t, b, "phone failover")
	ada, _ := joinMember(t, b, s.ID, "Ada")
	mouth := udpConn(t)
	sl := addLink(t, b, s.ID, map[string]any{"remote": mouth.LocalAddr().String(), "kind": "audio",
		"direction": "sendrecv", "member": ada, "mix": "PCMU"})
	quiet := make(chan struct{})
	defer close(quiet)
	go pcmuTone(mouth, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sl.Local.RTPPort}, 440, quiet, nil)

	phone := udpConn(t) // the phone's media
	mport := phone.LocalAddr().(*net.UDPAddr).Port
	p := startSIPpTo(t, ctx, a.sip, "dialin_failover.xml", s.ID, "carol", carolPass, 150*time.Second,
		"-set", "mport", strconv.Itoa(mport), "-trace_msg")
	nodeMedia := func(i int) string { // the i-th media address a node gave the phone
		fs, _ := filepath.Glob(filepath.Join(p.cmd.Dir, "*_messages.log"))
		if len(fs) != 1 {
			return "" // not written yet
		}
		trace, _ := os.ReadFile(fs[0])
		var got []string
		for _, addr := range sdpAudio(string(trace)) {
			if !strings.HasSuffix(addr, ":"+strconv.Itoa(mport)) {
				got = append(got, addr)
			}
		}
		if len(got) > i {
			return got[i]
		}
		return ""
	}
	testutil.WaitFor(t, 30*time.Second, "node A's answer", func() bool { return nodeMedia(0) != "" })
	atA, err := net.ResolveUDPAddr("udp", nodeMedia(0))
	if err != nil {
		t.Fatal(err)
	}
	if atA.String() != a.rtp {
		t.Fatalf("node A answered with media at %s, want its socket %s", atA, a.rtp)
	}
	speakA := make(chan struct{})
	go pcmuTone(phone, atA, 1000, speakA, nil)
	hears440 := func(at string) {
		t.Helper()
		heard := heardPCMU(phone, 3*time.Second)
		if len(heard) < 8000 {
			t.Fatalf("through %s the phone heard %d samples of its mix in 3 s", at, len(heard))
		}
		if sh := audio.WindowedToneShare(heard[len(heard)/2:], 440, 8000); sh < 0.2 {
			t.Fatalf("through %s the phone hears Ada's 440 Hz at %.2f of the energy", at, sh)
		}
	}
	hears440("node A")

	a.kill9()
	killed := time.Now()
	close(speakA)
	testutil.WaitUntil(t, 60*time.Second, func() string {
		if nodeMedia(1) == "" {
			return "no re-INVITE reached the phone"
		}
		return ""
	})
	took := time.Since(killed)
	if got, want := nodeMedia(1), b.RTPAddr(); got != want {
		t.Fatalf("the re-INVITE offers media at %s, want node B's socket %s", got, want)
	}
	trace := p.messages(t)
	if !strings.Contains(trace, "taken over by sip:"+s.ID+"@"+b.SIPAddr()) {
		t.Errorf("the re-INVITE's Contact is not the session at node B (%s):\n%s", b.SIPAddr(), trace)
	}
	t.Logf("node B re-INVITEd the phone %v after node A was killed", took.Round(time.Millisecond))
	atB, _ := net.ResolveUDPAddr("udp", b.RTPAddr())
	speakB := make(chan struct{})
	defer close(speakB)
	go pcmuTone(phone, atB, 1000, speakB, nil)
	hears440("node B")
	var view sessionJSON
	call(t, "GET", b.URL()+"/api/v1/sessions/"+s.ID, nil, &view)
	var phoneLink linkJSON
	for _, l := range view.Links {
		if l.Remote == phone.LocalAddr().String() {
			phoneLink = l
		}
	}
	if phoneLink.ID == "" || phoneLink.Stats.PacketsIn < 50 {
		t.Fatalf("node B's link of the phone %+v: want it, with the phone's packets in", phoneLink)
	}

	p.wait(t) // its BYE was answered 200, by node B
	testutil.WaitUntil(t, 10*time.Second, func() string {
		var got struct{ Members []struct{ ID, Name string } }
		call(t, "GET", b.URL()+"/api/v1/sessions/"+s.ID+"/members", nil, &got)
		for _, m := range got.Members {
			if strings.HasSuffix(m.Name, phoneSuffix) {
				return fmt.Sprintf("the phone's member %s is still in the session after its BYE", m.ID)
			}
		}
		return ""
	})
	if calls, err := b.cat.SIPCalls(ctx, s.ID); err != nil || len(calls) != 0 {
		t.Errorf("the catalog keeps %d calls after the hang-up (%v)", len(calls), err)
	}
	if v := metricValue(t, b, `convene_sip_calls_total{result="conference_resumed"}`); v != 1 {
		t.Errorf("calls resumed on node B: %v, want 1", v)
	}
}

// TestMovedPhoneCallLetGo: a node of a cluster answers a SIPp phone's call
// and keeps it in the catalog; when the catalog says another node serves
// the call (it took it over while this one was cut off), the node lets it
// go at its next lease round: the call is no longer answered here, and
// the phone's member stays in the session, the stored call untouched.
func TestMovedPhoneCallLetGo(t *testing.T) {
	testutil.NeedBinary(t, "sipp")
	c := startCluster(t)
	n := c.start(t, "node-a", func(cfg *config.Config) { cfg.SIP.Domain = "convene.test" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := n.sipUsers.Add(ctx, "carol", carolPass); err != nil {
		t.Fatal(err)
	}
	s := createSession(t, n, "moved call")
	phone := udpConn(t)
	startSIPpTo(t, ctx, n.SIPAddr(), "dialin_failover.xml", s.ID, "carol", carolPass, 100*time.Second,
		"-set", "mport", strconv.Itoa(phone.LocalAddr().(*net.UDPAddr).Port))
	var kept []catalog.SIPCall
	testutil.WaitUntil(t, 30*time.Second, func() string {
		var err error
		if kept, err = n.cat.SIPCalls(ctx, s.ID); err != nil || len(kept) != 1 || kept[0].Node != "node-a" {
			return fmt.Sprintf("stored calls %+v (%v), want the phone's on node-a", kept, err)
		}
		return ""
	})
	moved := kept[0]
	moved.Node = "node-b"
	if err := n.cat.PutSIPCall(ctx, moved); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 15*time.Second, "the call let go", func() bool {
		return metricValue(t, n, `convene_sip_calls_total{result="conference_let_go"}`) == 1
	})
	var got struct{ Members []struct{ ID, Name string } }
	call(t, "GET", n.URL()+"/api/v1/sessions/"+s.ID+"/members", nil, &got)
	if len(got.Members) != 1 || got.Members[0].ID != kept[0].Member {
		t.Errorf("members %+v, want the phone's %s kept", got.Members, kept[0].Member)
	}
	if after, err := n.cat.SIPCalls(ctx, s.ID); err != nil || len(after) != 1 || after[0].Node != "node-b" {
		t.Errorf("stored calls after letting go %+v (%v), want node-b's untouched", after, err)
	}
}
