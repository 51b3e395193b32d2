package proc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// UDPDrops returns the datagrams the kernel dropped at the UDP sockets a
// process holds open (their receive buffers full), from the drops column
// of /proc/net/udp and udp6, matched to the process's sockets by inode
// (/proc/PID/fd). A benchmark tells a server that did not read in time
// from a load that did not.
func UDPDrops(pid int) (uint64, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var total uint64
	for _, table := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		n, err := udpDrops(f, inodes)
		f.Close()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// udpDrops sums the drops of the sockets in inodes in a /proc/net/udp
// table: sl local rem st queues tr tm retrnsmt uid timeout inode ref
// pointer drops.
func udpDrops(r io.Reader, inodes map[string]bool) (uint64, error) {
	var total uint64
	sc := bufio.NewScanner(r)
	sc.Scan() // the heading
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 13 {
			continue
		}
		if !inodes[f[9]] {
			continue
		}
		n, err := strconv.ParseUint(f[len(f)-1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected /proc/net/udp line %q", sc.Text())
		}
		total += n
	}
	return total, sc.Err()
}
