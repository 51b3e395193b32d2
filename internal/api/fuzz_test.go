package api

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/convene/convene/internal/session"
)

// FuzzDecodeJSON: request bodies never panic the decoder, and whatever it
// accepts is a single JSON object of the request's shape.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{
		`{"remote":"127.0.0.1:5004","kind":"audio","direction":"sendrecv"}`,
		`{"remote":"[::1]:5004","kind":"video","rtcp_mux":true}`,
		`{"group":"239.1.2.3:5004","kind":"audio","ttl":1}`,
		`{"title":"standup","description":"Monday"}`, `{"title":null}`,
		``, `{}`, `null`, `[]`, `{"kind":1}`, `{"a":}`, `{"remote":"x"} trailing`, "\x00\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var a session.NewRTPLink
		if decodeJSON(body, &a) == nil && len(bytes.TrimSpace(body)) > 0 && !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		var b session.NewMulticastLink
		_ = decodeJSON(body, &b)
		var c createSessionRequest
		_ = decodeJSON(body, &c)
		var r recordingRequest
		_ = decodeJSON(body, &r)
		var pr recordingPatch
		_ = decodeJSON(body, &pr)
	})
}
