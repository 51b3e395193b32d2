//go:build !unix

package multicast

import (
	"errors"
	"net"
	"net/netip"
)

func listenGroup(netip.AddrPort) (*net.UDPConn, error) {
	return nil, errors.New("binding to a multicast group address is only supported on unix")
}
