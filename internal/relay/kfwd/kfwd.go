package kfwd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// Key selects a flow: the datagram's source and destination as they arrive
// (IPv4 and UDP port, in network order, as they sit in the packet).
type Key struct {
	Src, Dst [4]byte
	SPort    [2]byte
	DPort    [2]byte
}

// value is the map's value; its first 12 bytes are written over the
// packet's addresses and ports.
type value struct {
	Out     Key    // the new source and destination
	Oif     uint32 // interface to route out of; 0 for loopback delivery
	Packets uint64
	Bytes   uint64
}

// Counts is what a flow forwarded.
type Counts struct {
	Packets, Bytes uint64
}

// MakeKey builds a Key from two IPv4 address-ports; ok is false for IPv6.
func MakeKey(src, dst netip.AddrPort) (Key, bool) {
	s, d := src.Addr().Unmap(), dst.Addr().Unmap()
	if !s.Is4() || !d.Is4() {
		return Key{}, false
	}
	var k Key
	k.Src, k.Dst = s.As4(), d.As4()
	binary.BigEndian.PutUint16(k.SPort[:], src.Port())
	binary.BigEndian.PutUint16(k.DPort[:], dst.Port())
	return k, true
}

// Forwarder is the program attached to one interface and its flow map.
type Forwarder struct {
	flows *ebpf.Map
	prog  *ebpf.Program
	lnk   link.Link
	lo    bool // the interface is loopback: flows are delivered locally
	ifidx int
	max   int

	mu     sync.Mutex
	closed bool
}

// Open loads the program and attaches it to the TCX ingress of the
// interface that holds addr (loopback for 127.0.0.0/8), for at most
// maxFlows flows at a time. Datagrams with a UDP payload larger than
// maxPayload (and any whose RTP header user space would refuse or inspect,
// see checkRTP) are left to the relay's sockets.
func Open(addr netip.Addr, maxFlows, maxPayload int) (*Forwarder, error) {
	addr = addr.Unmap()
	if !addr.Is4() {
		return nil, errors.New("kfwd: only IPv4 is forwarded in the kernel")
	}
	ifi, err := interfaceOf(addr)
	if err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("kfwd: memlock: %w", err)
	}
	flows, err := ebpf.NewMap(&ebpf.MapSpec{
		Name: "convene_flows", Type: ebpf.Hash,
		KeySize: uint32(binary.Size(Key{})), ValueSize: uint32(binary.Size(value{})),
		MaxEntries: uint32(maxFlows),
	})
	if err != nil {
		return nil, fmt.Errorf("kfwd: flow map: %w", err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "convene_fwd", Type: ebpf.SchedCLS, License: "GPL",
		Instructions: program(flows.FD(), maxPayload),
	})
	if err != nil {
		flows.Close()
		return nil, fmt.Errorf("kfwd: load program: %w", err)
	}
	lnk, err := link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: prog, Attach: ebpf.AttachTCXIngress})
	if err != nil {
		prog.Close()
		flows.Close()
		return nil, fmt.Errorf("kfwd: attach to %s ingress: %w", ifi.Name, err)
	}
	return &Forwarder{flows: flows, prog: prog, lnk: lnk, lo: ifi.Flags&net.FlagLoopback != 0,
		ifidx: ifi.Index, max: maxFlows}, nil
}

// interfaceOf finds the interface that has addr.
func interfaceOf(addr netip.Addr) (*net.Interface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("kfwd: interfaces: %w", err)
	}
	for i := range ifs {
		if addr.IsLoopback() && ifs[i].Flags&net.FlagLoopback != 0 {
			return &ifs[i], nil
		}
		as, err := ifs[i].Addrs()
		if err != nil {
			continue
		}
		for _, a := range as {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Unmap() == addr {
				return &ifs[i], nil
			}
		}
	}
	return nil, fmt.Errorf("kfwd: no interface has address %s", addr)
}

// Add forwards datagrams matching in as from out.Src/SPort to
// out.Dst/DPort, replacing any earlier entry for in. A flow that arrives on
// loopback must go to a loopback address and one that arrives elsewhere must
// leave by the interface: other flows are refused.
func (f *Forwarder) Add(in, out Key) error {
	v := value{Out: out}
	inLo, outLo := in.Src[0] == 127, out.Dst[0] == 127
	switch {
	case f.lo && inLo && outLo:
	case !f.lo && !inLo && !outLo:
		v.Oif = uint32(f.ifidx)
	default:
		return errors.New("kfwd: flow crosses between loopback and another interface")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("kfwd: closed")
	}
	if err := f.flows.Update(&in, &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("kfwd: add flow: %w", err)
	}
	return nil
}

// Delete stops forwarding in and returns what it forwarded; a flow that was
// not there returns zero counts.
func (f *Forwarder) Delete(in Key) Counts {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return Counts{}
	}
	var v value
	if err := f.flows.LookupAndDelete(&in, &v); err != nil {
		// LookupAndDelete on hash maps needs 5.14; fall back for safety.
		if f.flows.Lookup(&in, &v) != nil {
			return Counts{}
		}
		_ = f.flows.Delete(&in)
	}
	return Counts{v.Packets, v.Bytes}
}

// Each calls fn with every flow's key and counts, read in batches.
func (f *Forwarder) Each(fn func(Key, Counts)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	const chunk = 1024
	keys := make([]Key, chunk)
	vals := make([]value, chunk)
	var cur ebpf.MapBatchCursor
	for {
		n, err := f.flows.BatchLookup(&cur, keys, vals, nil)
		for i := 0; i < n; i++ {
			fn(keys[i], Counts{vals[i].Packets, vals[i].Bytes})
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("kfwd: read flows: %w", err)
		}
	}
}

// Close detaches the program and frees the map.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	err := f.lnk.Close()
	f.prog.Close()
	f.flows.Close()
	return err
}
