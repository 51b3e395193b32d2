package sipbench

import (
	"bufio"
	"strings"
	"testing"
)

func TestParseRcvbufErrors(t *testing.T) {
	const snmp = `Ip: Forwarding DefaultTTL
Ip: 1 64
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 936308890 479409 47398330 843370792 47398325 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 7 0 0 0 0
`
	if got := parseRcvbufErrors(bufio.NewScanner(strings.NewReader(snmp))); got != 47398325 {
		t.Fatalf("got %d, want 47398325", got)
	}
	if got := parseRcvbufErrors(bufio.NewScanner(strings.NewReader("Udp: A B\nUdp: 1 x\n"))); got != -1 {
		t.Fatalf("no RcvbufErrors column: got %d, want -1", got)
	}
	if got := udpRcvbufErrors(); got < 0 {
		t.Fatalf("reading /proc/net/snmp: got %d", got)
	}
}
