package relay

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

const webrtcLikeSDP = "v=0\r\n" +
	"o=- 4611731400430051336 2 IN IP4 192.168.1.20\r\n" +
	"s=-\r\n" +
	"t=0 0\r\n" +
	"a=ice-lite\r\n" +
	"m=audio 49170 RTP/AVP 0 8\r\n" +
	"c=IN IP4 192.168.1.20\r\n" +
	"a=rtcp:49171 IN IP4 192.168.1.20\r\n" +
	"a=ice-ufrag:F7gI\r\n" +
	"a=ice-pwd:x9cml/YzichV2+XlhiMu8g\r\n" +
	"a=candidate:1 1 UDP 2130706431 192.168.1.20 49170 typ host\r\n" +
	"a=candidate:2 1 UDP 1694498815 203.0.113.7 61000 typ srflx raddr 192.168.1.20 rport 49170\r\n" +
	"a=sendrecv\r\n" +
	"m=video 0 RTP/AVP 96\r\n" +
	"c=IN IP4 192.168.1.20\r\n" +
	"m=message 7394 TCP/MSRP *\r\n" +
	"c=IN IP4 192.168.1.20\r\n"

func TestParseSDP(t *testing.T) {
	d, err := parseSDP([]byte(webrtcLikeSDP))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.media) != 3 {
		t.Fatalf("%d media, want 3", len(d.media))
	}
	m := d.media[0]
	if m.rtpAddr != netip.MustParseAddrPort("192.168.1.20:49170") || m.rtcpAddr != netip.MustParseAddrPort("192.168.1.20:49171") ||
		!m.rtp || !m.relayed || m.mux {
		t.Errorf("audio: %+v", m)
	}
	if d.media[1].port != 0 {
		t.Errorf("disabled video: %+v", d.media[1])
	}
	if d.media[2].relayed {
		t.Errorf("TCP/MSRP marked as relayed: %+v", d.media[2])
	}

	out, err := d.rewrite(netip.MustParseAddr("10.0.0.1"), []int{30000, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"m=audio 30000 RTP/AVP 0 8\r\nc=IN IP4 10.0.0.1\r\n", "a=rtcp:30001 IN IP4 10.0.0.1\r\n",
		"m=video 0 RTP/AVP 96\r\n", "m=message 0 TCP/MSRP *\r\n", "a=sendrecv\r\n", "o=- 4611731400430051336 2 IN IP4 192.168.1.20\r\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("rewritten SDP lacks %q:\n%s", want, s)
		}
	}
	for _, gone := range []string{"candidate", "ice-", "49170", "203.0.113.7"} {
		if strings.Contains(s, gone) {
			t.Errorf("rewritten SDP still has %q:\n%s", gone, s)
		}
	}
}

func TestParseSDPSessionConnection(t *testing.T) {
	body := offerSDP(netip.MustParseAddrPort("192.0.2.5:7078"), "a=rtcp-mux")
	d, err := parseSDP(body)
	if err != nil {
		t.Fatal(err)
	}
	if m := d.media[0]; !m.mux || m.rtcpAddr != m.rtpAddr {
		t.Errorf("rtcp-mux: %+v", m)
	}
	out, err := d.rewrite(netip.MustParseAddr("2001:db8::1"), []int{40000})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("c=IN IP6 2001:db8::1\r\n")) || !bytes.Contains(out, []byte("m=audio 40000 ")) ||
		!bytes.Contains(out, []byte("a=rtcp-mux\r\n")) {
		t.Errorf("rewritten:\n%s", out)
	}
}

func TestParseSDPErrors(t *testing.T) {
	for name, body := range map[string]string{
		"empty":       "",
		"garbage":     "hello world",
		"no media":    "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nt=0 0\r\n",
		"no c=":       "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n",
		"hostname c=": "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nc=IN IP4 phone.example\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n",
		"family":      "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nc=IN IP6 1.2.3.4\r\nt=0 0\r\nm=audio 4000 RTP/AVP 0\r\n",
		"big port":    "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nc=IN IP4 1.2.3.4\r\nt=0 0\r\nm=audio 70000 RTP/AVP 0\r\n",
		"too big":     strings.Repeat("x", maxSDPBytes+1),
	} {
		if _, err := parseSDP([]byte(body)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// FuzzSDP feeds arbitrary bodies to the parser and rewriter: no panic, and
// whatever parses rewrites into SDP that parses again and points at the
// relay.
func FuzzSDP(f *testing.F) {
	f.Add([]byte(webrtcLikeSDP))
	f.Add(offerSDP(netip.MustParseAddrPort("127.0.0.1:4000"), "a=rtcp-mux"))
	f.Add(offerSDP(netip.MustParseAddrPort("[::1]:4000"), "a=rtcp:9 IN IP6 ::1"))
	local := netip.MustParseAddr("127.0.0.1")
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := parseSDP(body)
		if err != nil {
			return
		}
		ports := make([]int, len(d.media))
		for i := range ports {
			ports[i] = 30000 + 2*i
		}
		out, err := d.rewrite(local, ports)
		if err != nil {
			return
		}
		d2, err := parseSDP(out)
		if err != nil {
			t.Fatalf("rewritten SDP does not parse: %v\n%q", err, out)
		}
		for i, m := range d2.media {
			if m.port != 0 && m.relayed && m.rtpAddr.Addr() != local {
				t.Fatalf("m= line %d points at %s, not the relay:\n%q", i, m.rtpAddr, out)
			}
		}
	})
}
