package node

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestNodeSIP: a node serves SIP with the accounts made through its REST
// API, challenges for its realm with both algorithms, and exports the SIP
// metrics on its registry.
func TestNodeSIP(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.SIP.Domain = "node.test"
	n := startNode(t, cfg)
	if code := call(t, "POST", n.URL()+"/api/v1/users", map[string]string{"username": "alice", "password": "pw-alice-long-enough"}, nil); code != 201 {
		t.Fatalf("create user: %d", code)
	}
	c, err := net.Dial("udp", n.SIPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	la := c.LocalAddr().String()
	c.Write([]byte("REGISTER sip:node.test SIP/2.0\r\nVia: SIP/2.0/UDP " + la + ";branch=z9hG4bKnode1\r\n" +
		"Max-Forwards: 70\r\nFrom: <sip:alice@node.test>;tag=1\r\nTo: <sip:alice@node.test>\r\nCall-ID: node-1\r\n" +
		"CSeq: 1 REGISTER\r\nContact: <sip:alice@" + la + ">\r\nContent-Length: 0\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	k, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	res := string(buf[:k])
	if !strings.HasPrefix(res, "SIP/2.0 401") || !strings.Contains(res, `realm="node.test"`) ||
		!strings.Contains(res, "algorithm=SHA-256") || !strings.Contains(res, "algorithm=MD5") {
		t.Fatalf("REGISTER answered:\n%s", res)
	}
	resp, err := getWithKey(n.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"convene_sip_challenges_total 1", "convene_sip_registrations 0", "convene_relay_calls_active"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("metrics lack %q", m)
		}
	}
	if err := n.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
}
