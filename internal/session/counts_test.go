package session

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

// Counts says what Load says of the packets taken and sent and of the
// queue drops, for live links and for links already closed.
func TestCountsMatchLoad(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t, filepath.Join(t.TempDir(), "c.db"))
	s, err := svc.Create(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	udp := func() *net.UDPConn {
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	speaker, listener := udp(), udp()
	from, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: speaker.LocalAddr().String(), Kind: "audio", RTCPMux: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddRTPLink(ctx, s.ID, NewRTPLink{Remote: listener.LocalAddr().String(), Kind: "audio", RTCPMux: true}); err != nil {
		t.Fatal(err)
	}
	to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: from.Local.RTPPort}
	const n = 40
	pkt := make([]byte, 172)
	pkt[0] = 0x80
	for i := range n {
		binary.BigEndian.PutUint16(pkt[2:], uint16(i))
		binary.BigEndian.PutUint32(pkt[8:], 0xfeed)
		if _, err := speaker.WriteToUDP(pkt, to); err != nil {
			t.Fatal(err)
		}
	}
	same := func() error {
		in, out, q := svc.Counts()
		ld := svc.Load()
		if in != ld.PacketsIn || out != ld.PacketsOut || q != ld.Dropped["queue_full"] {
			return fmt.Errorf("Counts %d in, %d out, %d queue drops; Load %d, %d, %d", in, out, q, ld.PacketsIn, ld.PacketsOut, ld.Dropped["queue_full"])
		}
		return nil
	}
	testutil.WaitFor(t, 5*time.Second, "the speaker's packets sent to the listener", func() bool {
		in, out, _ := svc.Counts()
		return in == n && out == n
	})
	if err := same(); err != nil {
		t.Fatal(err)
	}
	if err := svc.RemoveLink(ctx, s.ID, LinkRTP, from.ID); err != nil {
		t.Fatal(err)
	}
	if err := same(); err != nil {
		t.Fatalf("after the speaker's link closed: %v", err)
	}
	if in, _, _ := svc.Counts(); in != n {
		t.Fatalf("after the speaker's link closed, Counts says %d packets taken, want %d", in, n)
	}
}
