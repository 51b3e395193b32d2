package rtctest

import (
	"net"
	"testing"
	"time"

	"github.com/pion/rtp"
)

func TestArrivalsTakeTheKernelsTime(t *testing.T) {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	arr := newArrivals()
	c := newStampedConn(rx, arr)
	if _, ok := c.(*stampedConn); !ok {
		t.Fatalf("not stamped: %T", c)
	}
	tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	// Linux turns its receive timestamps on a moment after the first
	// socket asks (a deferred work item); until then it stamps a packet
	// when it is read.
	time.Sleep(100 * time.Millisecond)

	pkt, _ := (&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 111, SequenceNumber: 65535, SSRC: 0xabcdef01}, Payload: make([]byte, 40)}).Marshal()
	rtcp := []byte{0x80, 200, 0, 6, 0xab, 0xcd, 0xef, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	sent := time.Now().UnixNano()
	if _, err := tx.Write(pkt); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Write(rtcp); err != nil {
		t.Fatal(err)
	}
	// The packets wait in the socket: the kernel's time is when they came,
	// not when they are read.
	time.Sleep(50 * time.Millisecond)
	buf := make([]byte, 1500)
	for range 2 {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, _, err := c.ReadFrom(buf); err != nil {
			t.Fatal(err)
		}
	}
	read := time.Now().UnixNano()
	at := arr.at(0xabcdef01, 65535)
	if at < sent || at > read {
		t.Fatalf("arrival %d not between send %d and read %d", at, sent, read)
	}
	if read-at < int64(40*time.Millisecond) {
		t.Fatalf("arrival %v before the read: the read's time, not the kernel's", time.Duration(read-at))
	}
	if got := arr.at(0xabcdef01, 65534); got != 0 {
		t.Fatalf("a packet never sent has an arrival: %d", got)
	}
	if len(arr.ssrc) != 1 {
		t.Fatalf("RTCP was noted as RTP: %d SSRCs", len(arr.ssrc))
	}
}

func TestArrivalsForgetOldPackets(t *testing.T) {
	arr := newArrivals()
	pkt := func(seq uint16) []byte {
		b, _ := (&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 96, SequenceNumber: seq, SSRC: 7}}).Marshal()
		return b
	}
	arr.note(pkt(1), 100)
	arr.note(pkt(1+1024), 200) // the same slot, a ring later
	if got := arr.at(7, 1); got != 0 {
		t.Fatalf("overwritten arrival still found: %d", got)
	}
	if got := arr.at(7, 1025); got != 200 {
		t.Fatalf("arrival of 1025: %d, want 200", got)
	}
}
