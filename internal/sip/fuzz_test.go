package sip

import (
	"os"
	"path/filepath"
	"testing"
)

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
