package node

import (
	"strings"
	"testing"
)

// A real node refuses links to its own SIP and RTP ports, from a member
// and from the operator alike, even with loopback allowed (the test config
// allows 127.0.0.0/8): a link to itself would loop media. Its HTTP port is
// TCP's: a link's UDP to that number reaches no part of the node (a
// co-located endpoint's socket may have it), so that link is taken.
func TestLinksToTheNodeItselfRefused(t *testing.T) {
	n := startNode(t, testConfig(t, t.TempDir()))
	s := createSession(t, n, "self")
	base := n.URL() + "/api/v1/sessions/" + s.ID
	member, tok := joinMember(t, n, s.ID, "m")
	own := map[string]string{"SIP": n.SIPAddr(), "RTP": n.RTPAddr()}
	for name, addr := range own {
		req := map[string]any{"remote": addr, "kind": "audio", "rtcp_mux": true, "member": member}
		if code := callAs(t, tok, "POST", base+"/rtp-links", req, nil); code != 400 {
			t.Errorf("member link to the node's %s port %s: %d, want 400", name, addr, code)
		}
		delete(req, "member")
		if code := call(t, "POST", base+"/rtp-links", req, nil); code != 400 {
			t.Errorf("operator link to the node's %s port %s: %d, want 400", name, addr, code)
		}
	}
	httpPort := strings.TrimPrefix(n.URL(), "http://")
	req := map[string]any{"remote": httpPort, "kind": "audio", "rtcp_mux": true, "member": member}
	if code := callAs(t, tok, "POST", base+"/rtp-links", req, nil); code != 201 {
		t.Errorf("member link to UDP at the number of the node's HTTP port %s: %d, want 201", httpPort, code)
	}
	// The legitimate local link still works.
	recv := udpConn(t)
	addLink(t, n, s.ID, map[string]any{"remote": recv.LocalAddr().String(), "kind": "audio", "direction": "recvonly"})
}
