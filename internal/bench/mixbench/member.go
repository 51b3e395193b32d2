package mixbench

import (
	"encoding/binary"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Member is one plain RTP endpoint of the load: it sends from and receives
// on Addr; a speaker sends its recording to Dst every 20 ms.
type Member struct {
	Session int // 0-based
	Speaks  bool
	Addr    netip.AddrPort // ours
	Dst     netip.AddrPort // the server's port for it
	voice   speech
	pkt     []byte // RTP header + room for a payload
	seq     uint16
	ts      uint32
	frame   int
	sa      unix.RawSockaddrInet4
	oob     [32]byte // IP_PKTINFO: send from Addr's IP
}

// NewMember makes member i of the load, speaking voice when speaks.
func (l *Load) NewMember(i, session int, speaks bool, voice speech, pt uint8) *Member {
	m := &Member{Session: session, Speaks: speaks, Addr: l.Addr(i), voice: voice, pkt: make([]byte, 12+1500)}
	m.pkt[0], m.pkt[1] = 0x80, pt&0x7f
	binary.BigEndian.PutUint32(m.pkt[8:], 0x5eed0000+uint32(i))
	m.seq, m.ts = uint16(i*7919), uint32(i)*104729
	// struct cmsghdr { len, level, type } then struct in_pktinfo.
	h := (*unix.Cmsghdr)(unsafe.Pointer(&m.oob[0]))
	h.Level, h.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
	pi := (*unix.Inet4Pktinfo)(unsafe.Pointer(&m.oob[unix.CmsgLen(0)]))
	pi.Spec_dst = m.Addr.Addr().As4()
	return m
}

// setDst fixes where the member sends.
func (m *Member) setDst(d netip.AddrPort) {
	m.Dst = d
	m.sa = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: d.Addr().As4()}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&m.sa.Port))[:], d.Port())
}

// next writes the member's next RTP packet (its next frame, or silence)
// and returns it.
func (m *Member) next(rate int, silent bool) []byte {
	p := m.voice.silence
	if !silent {
		p = m.voice.frames[m.frame%len(m.voice.frames)]
		m.frame++
	}
	binary.BigEndian.PutUint16(m.pkt[2:], m.seq)
	binary.BigEndian.PutUint32(m.pkt[4:], m.ts)
	m.seq++
	m.ts += uint32(rate / 50)
	return m.pkt[:12+copy(m.pkt[12:], p)]
}

// sendBatch sends each member's packet from its own address, in batches.
func sendBatch(fd int, ms []*Member, pkts [][]byte, msgs []mmsghdr, iovs []unix.Iovec) (sent, failed int) {
	for len(ms) > 0 {
		k := min(len(ms), batch)
		for i := range k {
			m := ms[i]
			iovs[i].Base = &pkts[i][0]
			iovs[i].SetLen(len(pkts[i]))
			msgs[i].hdr = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&m.sa)), Namelen: unix.SizeofSockaddrInet4,
				Iov: &iovs[i], Control: &m.oob[0]}
			msgs[i].hdr.SetIovlen(1)
			msgs[i].hdr.SetControllen(unix.CmsgSpace(unix.SizeofInet4Pktinfo))
		}
		off := 0
		for off < k {
			r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[off])), uintptr(k-off), 0, 0, 0)
			if e == unix.EAGAIN || e == unix.ENOBUFS {
				time.Sleep(100 * time.Microsecond)
				continue
			}
			if e != 0 {
				// This one datagram is refused (an unreachable port, say):
				// count it and go on with the rest.
				failed++
				off++
				continue
			}
			off += int(r)
			sent += int(r)
		}
		ms, pkts = ms[k:], pkts[k:]
	}
	return sent, failed
}
