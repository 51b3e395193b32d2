package webui

import (
	"strings"
	"testing"
)

// TestCSPForPeers: the cluster's other nodes' origins are added to
// connect-src, and nothing else: an origin with a path, a query, user
// info, another scheme, or characters a policy could read as more (a
// space, ';', a quote) is left out, and so is any beyond the bound.
func TestCSPForPeers(t *testing.T) {
	got := cspFor([]string{"http://10.0.0.2:8080", "https://node-b.example.org", "http://[::1]:9000",
		"http://x:1/path", "http://x:1?q", "javascript://x", "http://a b", "http://x;script-src *", "http://u@x",
		"http://x'", "ws://x:1", ""})
	want := "connect-src 'self' ws: wss: http://10.0.0.2:8080 https://node-b.example.org http://[::1]:9000;"
	if !strings.Contains(got, want) {
		t.Fatalf("policy %q\nwant it to contain %q", got, want)
	}
	if strings.Count(got, ";") != strings.Count(csp, ";") || !strings.HasSuffix(got, cspTail) {
		t.Fatalf("policy %q has directives of its own", got)
	}
	var many []string
	for i := range 100 {
		many = append(many, "http://10.0.0."+string(rune('0'+i%10))+":1")
	}
	if n := strings.Count(cspFor(many), " http://"); n != maxPeerOrigins {
		t.Errorf("%d origins in the policy, want the bound %d", n, maxPeerOrigins)
	}
	if cspFor(nil) != csp {
		t.Error("without peers the policy is not the lone node's")
	}
}

// FuzzCSPFor: whatever the peers say, the policy keeps its directives.
func FuzzCSPFor(f *testing.F) {
	f.Add("http://10.0.0.2:8080")
	f.Add("http://x;default-src *")
	f.Fuzz(func(t *testing.T, o string) {
		got := cspFor([]string{o})
		if strings.Count(got, ";") != strings.Count(csp, ";") || !strings.HasPrefix(got, cspHead) || !strings.HasSuffix(got, cspTail) {
			t.Fatalf("peer %q changed the policy's directives: %q", o, got)
		}
		if strings.ContainsAny(got[len(cspHead):len(got)-len(cspTail)], "'\"\n\r;,") {
			t.Fatalf("peer %q put a quote or separator in connect-src: %q", o, got)
		}
	})
}
