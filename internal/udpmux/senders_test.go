package udpmux

import (
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/convene/convene/internal/media"
)

// The writers' own sockets send from the shared socket's address and never
// take a datagram meant for it: without the reuseport program the kernel
// would hash most of these 64 sources to one of the three sending sockets.
func TestWriterSocketsShareTheAddress(t *testing.T) {
	for _, batch := range []bool{true, false} {
		t.Run("batch="+strconv.FormatBool(batch), func(t *testing.T) {
			s, err := Listen("127.0.0.1:0", Options{Batch: batch, Writers: 3})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i, w := range s.ws {
				if w.fd < 0 {
					t.Fatalf("writer %d has no socket of its own", i)
				}
			}
			const sources = 64
			got := make(chan netip.AddrPort, sources)
			var conns []*net.UDPConn
			for range sources {
				c := udp(t)
				conns = append(conns, c)
				if err := s.Register(addrOf(c), handlerFunc(func(p *media.Packet, from netip.AddrPort) {
					p.Release()
					got <- from
				})); err != nil {
					t.Fatal(err)
				}
			}
			to := net.UDPAddrFromAddrPort(s.LocalAddr())
			for _, c := range conns {
				if _, err := c.WriteToUDP([]byte("hello"), to); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.After(5 * time.Second)
			for i := range sources {
				select {
				case <-got:
				case <-deadline:
					t.Fatalf("%d of %d datagrams reached the shared socket (stats %+v)", i, sources, s.Stats())
				}
			}

			// Each writer's datagrams leave from the shared address.
			for i, c := range conns[:8] {
				d := NewDest(addrOf(c), 4)
				p := media.NewPacket()
				p.SetLen(copy(p.Buffer(), "x"+strconv.Itoa(i)))
				if !s.Send(p, d) {
					t.Fatal("send refused")
				}
				buf := make([]byte, 64)
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				n, from, err := c.ReadFromUDPAddrPort(buf)
				if err != nil {
					t.Fatal(err)
				}
				if string(buf[:n]) != "x"+strconv.Itoa(i) || netip.AddrPortFrom(from.Addr().Unmap(), from.Port()) != s.LocalAddr() {
					t.Fatalf("got %q from %s, want %q from %s", buf[:n], from, "x"+strconv.Itoa(i), s.LocalAddr())
				}
			}
		})
	}
}

// A port taken by another socket, reuseport or not, is refused.
func TestListenUDPTakenPort(t *testing.T) {
	s, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, err := ListenUDP(s.LocalAddr().String()); err == nil {
		c.Close()
		t.Fatalf("a second ListenUDP on %s succeeded", s.LocalAddr())
	}
	plain := udp(t)
	if c, err := ListenUDP(addrOf(plain).String()); err == nil {
		c.Close()
		t.Fatalf("ListenUDP on a plain socket's port %s succeeded", addrOf(plain))
	}
}

// A socket opened without SO_REUSEPORT is shared as before: its writers
// send on it.
func TestPlainSocketWriters(t *testing.T) {
	conn := udp(t)
	s := New(conn, Options{Writers: 2})
	defer s.Close()
	for i, w := range s.ws {
		if w.fd >= 0 {
			t.Fatalf("writer %d opened a socket of its own on a plain socket", i)
		}
	}
	rx := udp(t)
	p := media.NewPacket()
	p.SetLen(copy(p.Buffer(), "plain"))
	s.Send(p, NewDest(addrOf(rx), 4))
	if got := recvOne(t, rx); string(got) != "plain" {
		t.Fatalf("got %q", got)
	}
}
