package digest

import (
	"testing"
	"time"
)

// FuzzParseCredentials: the Authorization parser never panics, and what it
// accepts is consistent.
func FuzzParseCredentials(f *testing.F) {
	for _, s := range []string{
		`Digest username="alice", realm="convene.test", nonce="abc", uri="sip:convene.test", response="0123", algorithm=MD5, cnonce="x", qop=auth, nc=00000001`,
		`Digest username="a\"b", realm="r", nonce="n", uri="sip:x", response="r"`,
		`digest  username = "alice" ,realm="x",nc=0000000A`,
		`Digest username="alice", username="bob"`,
		`Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==`,
		`Digest `, `Digest a`, `Digest a="`, `Digest nc=1`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCredentials(s)
		if err != nil {
			return
		}
		if c.NCRaw != "" && len(c.NCRaw) != 8 {
			t.Fatalf("accepted nc %q", c.NCRaw)
		}
	})
}

// FuzzNonce: arbitrary nonces are never accepted.
func FuzzNonce(f *testing.F) {
	n := NewNonces(time.Minute, 1<<4)
	now := time.Now()
	f.Add(n.Issue(now), uint32(1))
	f.Add("", uint32(0))
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", uint32(7))
	f.Fuzz(func(t *testing.T, nonce string, nc uint32) {
		other := NewNonces(time.Minute, 1<<4) // another key: nothing it did not issue passes
		if other.Use(nonce, nc, 0, now) == NonceOK {
			t.Fatalf("foreign nonce %q accepted", nonce)
		}
		n.Use(nonce, nc, 0, now)
	})
}
