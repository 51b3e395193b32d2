package sip

import (
	"os"
	"path/filepath"
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
		c, err := parseCredentials(s)
		if err != nil {
			return
		}
		if c.ncRaw != "" && len(c.ncRaw) != 8 {
			t.Fatalf("accepted nc %q", c.ncRaw)
		}
	})
}

// FuzzNonce: arbitrary nonces are never accepted.
func FuzzNonce(f *testing.F) {
	n := newNonces(time.Minute, 1<<4)
	now := time.Now()
	f.Add(n.issue(now), uint32(1))
	f.Add("", uint32(0))
	f.Add("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", uint32(7))
	f.Fuzz(func(t *testing.T, nonce string, nc uint32) {
		other := newNonces(time.Minute, 1<<4) // another key: nothing it did not issue passes
		if other.use(nonce, nc, 0, now) == nonceOK {
			t.Fatalf("foreign nonce %q accepted", nonce)
		}
		n.use(nonce, nc, 0, now)
	})
}

// FuzzRequest: any datagram goes through the parser and the handlers
// without a panic, and a request gets at most a well-formed answer.
func FuzzRequest(f *testing.F) {
	files, _ := filepath.Glob("testdata/rfc4475/*/*.dat")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("REGISTER sip:convene.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5999;branch=z9hG4bK1\r\n" +
		"From: <sip:alice@convene.test>;tag=1\r\nTo: <sip:alice@convene.test>\r\nCall-ID: 1\r\nCSeq: 1 REGISTER\r\n" +
		"Contact: <sip:alice@127.0.0.1:5999>;expires=60\r\nAuthorization: Digest username=\"alice\", realm=\"convene.test\", " +
		"nonce=\"x\", uri=\"sip:convene.test\", response=\"0\", qop=auth, nc=00000001, cnonce=\"c\"\r\nContent-Length: 0\r\n\r\n"))
	e := newTestEnv(f, nil, "alice")
	f.Fuzz(func(t *testing.T, data []byte) {
		code, _ := tortureOutcome(t, e, data)
		if code != 0 && (code < 100 || code > 699) {
			t.Fatalf("status %d", code)
		}
	})
}
