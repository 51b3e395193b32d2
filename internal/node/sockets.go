package node

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/convene/convene/internal/rtplink"
	"github.com/convene/convene/internal/udpmux"
)

// readBuffer is what the shared RTP and RTCP sockets ask for as receive
// buffer: every endpoint's media arrives on one socket and one reader, and
// the buffer is what carries that reader through a moment the machine does
// not run it. 32 MiB holds about 150 ms of 80,000 video packets a second
// (the overload benchmark's 1,770 speakers), where the kernel's usual cap
// (net.core.rmem_max, 4 MiB here, doubled for its bookkeeping) held 45 ms
// and dropped the rest; without CAP_NET_ADMIN the cap still applies, so
// raise net.core.rmem_max (README, SECURITY.md).
const readBuffer = 32 << 20

// openSockets opens the shared RTP socket on addr:port and the RTCP socket on
// port+1. Port 0 picks a free pair.
func openSockets(addr string, port int, o udpmux.Options) (rtplink.Sockets, error) {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return rtplink.Sockets{}, fmt.Errorf("rtp.addr: %w", err)
	}
	// udpmux.ListenUDP: SO_REUSEPORT, so the writers can send from sockets
	// of their own on the same address.
	bind := func(p int) (*net.UDPConn, error) {
		return udpmux.ListenUDP(netip.AddrPortFrom(ip, uint16(p)).String())
	}
	for try := 0; try < 100; try++ {
		rtp, err := bind(port)
		if err != nil {
			return rtplink.Sockets{}, fmt.Errorf("rtp socket: %w", err)
		}
		p := rtp.LocalAddr().(*net.UDPAddr).Port
		rtcp, err := bind(p + 1)
		if err != nil {
			rtp.Close()
			if port != 0 {
				return rtplink.Sockets{}, fmt.Errorf("rtcp socket: %w", err)
			}
			continue // the random port's neighbour is taken: try another pair
		}
		o.ReadBuffer, o.WriteBuffer = readBuffer, 8<<20
		return rtplink.Sockets{RTP: udpmux.New(rtp, o), RTCP: udpmux.New(rtcp, o)}, nil
	}
	return rtplink.Sockets{}, fmt.Errorf("no free pair of UDP ports on %s", addr)
}
