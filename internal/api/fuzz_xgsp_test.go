package api

import (
	"strconv"
	"testing"
)

// FuzzParseAfter: any resume parameter is either a number that prints back
// the same or an error, never a panic or a negative position.
func FuzzParseAfter(f *testing.F) {
	for _, s := range []string{"", "0", "17", "-1", "18446744073709551615", " 5 ", "1e3", "0x10"} {
		f.Add(s, "")
	}
	f.Add("", "42")
	f.Fuzz(func(t *testing.T, q, h string) {
		n, err := parseAfter(q, h)
		if err != nil {
			return
		}
		if n < -1 {
			t.Fatalf("parseAfter(%q, %q) = %d", q, h, n)
		}
		if n >= 0 {
			if _, err := strconv.ParseUint(strconv.FormatInt(n, 10), 10, 63); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzRequestBodies: the new request bodies decode or give an error.
func FuzzRequestBodies(f *testing.F) {
	for _, s := range []string{`{"id":"1","op":"request","floor":"audio"}`, `{"op":"distribute","members":["a","b"]}`,
		`{"name":"x","start_at":"2030-01-01T00:00:00Z"}`, `{"start_at":"yesterday"}`, `{"role":"chair","ttl_seconds":60}`,
		`{"style":"activity_sensing","silence_ms":250}`, `{"action":"finish"}`, `[]`, `{"members":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fb floorBody
		_ = decodeJSON(b, &fb)
		var cs createSessionRequest
		_ = decodeJSON(b, &cs)
		var tr tokenRequest
		_ = decodeJSON(b, &tr)
		var sr stateRequest
		_ = decodeJSON(b, &sr)
	})
}
