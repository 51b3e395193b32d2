package sip

import "testing"

func TestURIHostPort(t *testing.T) {
	for _, c := range []struct {
		in   string
		host string
		port int
	}{
		{"sip:bob@127.0.0.1:5070;transport=udp", "127.0.0.1", 5070},
		{"sip:127.0.0.1:5070", "127.0.0.1", 5070},
		{"sip:bob@example.com", "example.com", 0},
		{"sips:[::1]:5061", "::1", 5061},
		{"tel:+123", "", 0},
		{"sip:[::1", "", 0},
	} {
		h, p := uriHostPort(c.in)
		if h != c.host || p != c.port {
			t.Errorf("%s: %q %d", c.in, h, p)
		}
	}
}

// FuzzInDialogCandidate: the raw pre-check never panics on any datagram.
func FuzzInDialogCandidate(f *testing.F) {
	f.Add([]byte("BYE sip:bob@127.0.0.1:5070 SIP/2.0\r\nRoute: <sip:127.0.0.1:5060;lr>\r\n\r\n"))
	f.Add([]byte("ACK sip:[::1 SIP/2.0\n\n"))
	f.Add([]byte("ACK \n"))
	s := &Server{o: Options{Advertise: "127.0.0.1", Domain: "convene.test"}, port: 5060}
	f.Fuzz(func(t *testing.T, data []byte) {
		s.inDialogCandidate(data)
		uriHostPort(string(data))
	})
}
