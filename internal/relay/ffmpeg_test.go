package relay

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/pion/rtp"

	"github.com/convene/convene/internal/testutil"
)

// TestFFmpegThroughRelay: a real RTP sender (ffmpeg, PCMU 20 ms) sends to the
// relay port of a call whose SDP gave a dead address for it, as a phone
// behind NAT would; the far side receives every packet byte-exact, in order,
// from the relay's port, and then reaches ffmpeg's real source address.
// A third party (another IP) sends to the same relay port first and
// throughout; it is refused and receives nothing.
func TestFFmpegThroughRelay(t *testing.T) {
	ffmpeg := testutil.NeedBinary(t, "ffmpeg")
	r := newTestRelay(t, nil)
	b := newEndpoint(t)
	offer, err := r.Offer("ffmpeg", "ff", offerSDP(netip.MustParseAddrPort("127.0.0.1:9")), "", netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	answer, err := r.Answer("ffmpeg", "ff", "b", offerSDP(b.addr()), netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	toA, toB := relayPort(t, answer), relayPort(t, offer)

	// ffmpeg's own RTP/RTCP source ports: we listen there to see what the
	// relay sends back once it has latched.
	src := newEndpoint(t)
	srcPort := src.addr().Port()
	const args = "sine=frequency=440:duration=2:sample_rate=8000"
	cmd := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-re", "-f", "lavfi", "-i", args,
		"-af", "asetnsamples=n=160", "-ac", "1", "-c:a", "pcm_mulaw", "-f", "rtp",
		fmt.Sprintf("rtp://%s?localrtpport=%d&localrtcpport=%d", toA, srcPort+2, srcPort+3))
	cmd.Stderr = os.Stderr
	src.conn.Close() // ffmpeg binds srcPort+2; this socket only reserved the neighbourhood
	evil := newEndpointOn(t, "127.0.0.66")
	evil.send(toA, rtpPacket(1, []byte("me first")))
	testutil.WaitFor(t, 10*time.Second, "the third party refused", func() bool { return r.Stats().Drops["refused_source"] == 1 })
	if err := cmd.Start(); err != nil {
		t.Fatalf("ffmpeg: %v", err)
	}
	for i := range 20 {
		evil.send(toA, rtpPacket(uint16(i), []byte("me too")))
		time.Sleep(10 * time.Millisecond) // spread over ffmpeg's 2 s; the order does not matter
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ffmpeg: %v", err)
	}
	want, err := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", args,
		"-ac", "1", "-f", "mulaw", "-").Output()
	if err != nil {
		t.Fatalf("ffmpeg reference: %v", err)
	}

	var pkts []rtp.Packet
	for {
		buf, from, err := b.tryRecv(time.Second)
		if err != nil {
			break
		}
		if from != toB {
			t.Fatalf("packet from %s, want the relay port %s", from, toB)
		}
		var p rtp.Packet
		if err := p.Unmarshal(buf); err != nil {
			t.Fatalf("packet %d is not RTP: %v", len(pkts), err)
		}
		pkts = append(pkts, p)
	}
	if len(pkts) < 90 {
		t.Fatalf("received %d packets, want the 100 of 2 s of 20 ms PCMU", len(pkts))
	}
	var payload []byte
	for i, p := range pkts {
		if p.PayloadType != 0 {
			t.Fatalf("packet %d: payload type %d, want 0 (PCMU)", i, p.PayloadType)
		}
		if i > 0 && p.SequenceNumber != pkts[i-1].SequenceNumber+1 {
			t.Fatalf("packet %d: sequence %d after %d", i, p.SequenceNumber, pkts[i-1].SequenceNumber)
		}
		payload = append(payload, p.Payload...)
	}
	if !bytes.Equal(payload, want[:min(len(want), len(payload))]) || len(payload) < len(want)*9/10 {
		t.Fatalf("payloads (%d bytes) differ from what ffmpeg encodes (%d bytes)", len(payload), len(want))
	}

	// The relay latched onto ffmpeg's real source port: b's reply goes there.
	st := r.Stats()
	if st.Drops["no_peer"] != 0 || st.Drops["source"]+st.Drops["refused_source"] != 21 {
		t.Errorf("drops %v, want only the third party's 21 packets", st.Drops)
	}
	ffSrc := newEndpointAt(t, srcPort+2)
	b.send(toB, rtpPacket(1, []byte("back to ffmpeg")))
	got, from := ffSrc.recv()
	if from != toA || !slices.Equal(got, rtpPacket(1, []byte("back to ffmpeg"))) {
		t.Fatalf("ffmpeg's source port got %x from %s", got, from)
	}
	if got, from, err := evil.tryRecv(100 * time.Millisecond); err == nil {
		t.Fatalf("the third party received %x from %s", got, from)
	}
}

func newEndpointAt(t *testing.T, port uint16) *endpoint {
	t.Helper()
	e := newEndpoint(t)
	e.conn.Close()
	var err error
	e.conn, err = listenAt(port)
	if err != nil {
		t.Fatalf("binding ffmpeg's source port %d after it exited: %v", port, err)
	}
	t.Cleanup(func() { e.conn.Close() })
	return e
}
