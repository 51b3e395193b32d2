package sipbench

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// udpRcvbufErrors returns the kernel's count of UDP datagrams dropped
// because a socket's receive buffer was full (Udp RcvbufErrors in
// /proc/net/snmp), or -1 when it cannot be read. A point's difference
// tells drops at a full socket (SIPp's or the server's) from a slow server.
func udpRcvbufErrors() int64 {
	f, err := os.Open("/proc/net/snmp")
	if err != nil {
		return -1
	}
	defer f.Close()
	return parseRcvbufErrors(bufio.NewScanner(f))
}

func parseRcvbufErrors(sc *bufio.Scanner) int64 {
	var names []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "RcvbufErrors" && i < len(f) {
				v, err := strconv.ParseInt(f[i], 10, 64)
				if err != nil {
					return -1
				}
				return v
			}
		}
		return -1
	}
	return -1
}
