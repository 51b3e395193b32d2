// Package kfwd forwards chosen UDP flows inside the kernel: a small eBPF
// program on an interface's TCX ingress hook matches each IPv4 UDP datagram
// whose payload starts like RTP or RTCP (version 2) against a hash map of
// flows, rewrites its addresses and ports, fixes the IP and UDP checksums and
// either passes it on to local delivery (loopback flows) or sends it straight
// out of the relay's interface, routed and given its Ethernet header by the
// kernel's own tables (bpf_redirect_neigh).
// A forwarded datagram never reaches a socket of the relay, so it costs no
// system call, no copy to user space and no wake-up.
//
// It is the relay's fast path, in the spirit of rtpengine's in-kernel
// forwarding: the relay (package relay) still receives every flow's first
// datagrams in user space, latches onto the sender, checks what it must, and
// only then installs the flow here. Anything the program does not match (not
// a flow, not version 2, a fragment, IP options, a GSO batch) it leaves
// untouched for the next program and for the relay's socket, so the
// user-space path stays correct on its own. So does anything user space
// would refuse or look at more closely: a payload above the relay's maximum
// size, an RTP header whose CSRC list or extension runs past the payload,
// padding, an RTCP packet type (prog.go, checkRTP); the kernel never forwards
// what user space would drop.
//
// Each flow counts the datagrams and bytes it forwarded; the relay reads them
// in batches for its metrics and media timeout. Loading needs CAP_BPF and
// CAP_NET_ADMIN (root); Open reports why it could not, and the relay then
// runs without it. The program and its link go away with the process.
package kfwd
