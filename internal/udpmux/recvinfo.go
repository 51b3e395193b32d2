package udpmux

import (
	"encoding/binary"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Receive-side accounting. The writers' queues are not the only place a
// node makes packets wait: a reader that the machine does not schedule in
// time leaves datagrams in the socket's receive queue, and once that is
// full the kernel drops what arrives — loss for every receiver of those
// senders, which no counter of the node's own saw. The kernel stamps each
// datagram as it is queued (SO_TIMESTAMPNS) and counts the datagrams it
// dropped at the socket (SO_RXQ_OVFL); both come with every read as
// control messages, so the reader measures how long each datagram waited
// for it (Stats.ReadDelay) and how many never reached it
// (Stats.SocketDrops) without another system call.

// oobSize holds both control messages: a timespec and a uint32 counter,
// each behind its header.
var oobSize = unix.CmsgSpace(16) + unix.CmsgSpace(4)

// enableRecvInfo asks the kernel for both control messages on conn's
// reads; false when it refused (the reader then reads without them).
func enableRecvInfo(conn *net.UDPConn) bool {
	rc, err := conn.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		e1 := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
		e2 := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
		ok = e1 == nil && e2 == nil
	})
	return ok
}

// recvInfo is what a read's control messages said: the kernel's receive
// time (Unix nanoseconds, 0 when absent) and its count of datagrams
// dropped at the socket so far (hasDrops false when absent: the kernel
// sends it only once it is not zero).
type recvInfo struct {
	stampNs  int64
	drops    uint32
	hasDrops bool
}

// parseRecvInfo reads the control messages of one read. It never fails:
// what it does not know, or what is cut short, it leaves out.
func parseRecvInfo(oob []byte) recvInfo {
	var ri recvInfo
	hdr := unix.CmsgLen(0)
	for len(oob) >= hdr {
		l, level, typ := cmsgHeader(oob)
		if l < hdr || l > len(oob) {
			break
		}
		data := oob[hdr:l]
		if level == unix.SOL_SOCKET {
			switch typ {
			case unix.SCM_TIMESTAMPNS:
				if len(data) >= 16 {
					sec := int64(binary.NativeEndian.Uint64(data))
					nsec := int64(binary.NativeEndian.Uint64(data[8:]))
					ri.stampNs = sec*1e9 + nsec
				}
			case unix.SO_RXQ_OVFL:
				if len(data) >= 4 {
					ri.drops, ri.hasDrops = binary.NativeEndian.Uint32(data), true
				}
			}
		}
		next := unix.CmsgSpace(l - hdr)
		if next > len(oob) {
			break
		}
		oob = oob[next:]
	}
	return ri
}

// cmsgHeader decodes a control message's header (struct cmsghdr: a
// size_t length, then level and type) without a pointer cast, which the
// byte slice's alignment would not allow.
func cmsgHeader(b []byte) (l int, level, typ int32) {
	if unix.SizeofCmsghdr == 16 {
		return int(binary.NativeEndian.Uint64(b)), int32(binary.NativeEndian.Uint32(b[8:])), int32(binary.NativeEndian.Uint32(b[12:]))
	}
	return int(binary.NativeEndian.Uint32(b)), int32(binary.NativeEndian.Uint32(b[4:])), int32(binary.NativeEndian.Uint32(b[8:]))
}

// waited is how long a datagram stamped at stampNs waited until now; 0
// for a missing stamp or a clock that stepped back.
func waited(stampNs int64, now time.Time) time.Duration {
	if stampNs == 0 {
		return 0
	}
	return max(0, time.Duration(now.UnixNano()-stampNs))
}
