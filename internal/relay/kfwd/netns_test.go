package kfwd

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/convene/convene/internal/testutil"
)

// TestRoutedFlowLeavesByTheInterface runs the forwarder on a veth interface
// whose other end is in a network namespace the test makes, holding both
// parties (10.77.x.2 and .3); the relay's address is on this end (.1). A
// flow from one party to the relay must come back out of the veth to the
// other party from the relay's other port, without touching the relay's
// sockets; the first one waits for the kernel to resolve b's MAC.
func TestRoutedFlowLeavesByTheInterface(t *testing.T) {
	testutil.NeedRoot(t, "a network namespace and an eBPF program")
	testutil.NeedBinary(t, "ip")
	ns, subnet := netnsPair(t)
	f := open(t, subnet+".1")

	relayIn := udp(t, subnet+".1:0")
	relayOut := udp(t, subnet+".1:0")
	var a, b *net.UDPConn
	inNetns(t, ns, func() {
		a = udp(t, subnet+".2:0")
		b = udp(t, subnet+".3:0")
	})
	if err := f.Add(key(t, ap(a), ap(relayIn)), key(t, ap(relayOut), ap(b))); err != nil {
		t.Fatal(err)
	}
	for seq := uint16(1); seq < 19; seq++ {
		p := rtpPacket(seq, 100)
		if _, err := a.WriteToUDPAddrPort(p, ap(relayIn)); err != nil {
			t.Fatal(err)
		}
		got, from := recv(b)
		if !bytes.Equal(got, p) || from != ap(relayOut) {
			t.Fatalf("seq %d: b got %x from %v, want it from %v", seq, got, from, ap(relayOut))
		}
	}
	c := f.Delete(key(t, ap(a), ap(relayIn)))
	if c.Packets != 18 {
		t.Fatalf("counts %+v, want 18 forwarded", c)
	}
	if got, _ := recv(relayIn); got != nil {
		t.Fatalf("the relay socket got %x; every datagram should have been forwarded", got)
	}
}

// netnsPair makes a namespace and a veth pair, the namespace's end with
// .2 and .3 of a /24 and this end with .1; all removed at cleanup.
func netnsPair(t *testing.T) (ns, subnet string) {
	t.Helper()
	id := os.Getpid() % 200
	ns = fmt.Sprintf("cvn-kfwd-%d", os.Getpid())
	subnet = fmt.Sprintf("10.77.%d", id+1)
	host, peer := fmt.Sprintf("cvk%da", os.Getpid()), fmt.Sprintf("cvk%db", os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run("link", "add", host, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	run("link", "set", peer, "netns", ns)
	run("addr", "add", subnet+".1/24", "dev", host)
	run("link", "set", host, "up")
	run("-n", ns, "addr", "add", subnet+".2/24", "dev", peer)
	run("-n", ns, "addr", "add", subnet+".3/24", "dev", peer)
	run("-n", ns, "link", "set", peer, "up")
	run("-n", ns, "link", "set", "lo", "up")
	return ns, subnet
}

// inNetns runs fn on a thread inside the named namespace; sockets made
// there stay in it after the thread returns.
func inNetns(t *testing.T, ns string, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := os.Open("/var/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			panic("cannot return to the original network namespace: " + err.Error())
		}
	}()
	fn()
}
