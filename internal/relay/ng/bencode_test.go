package ng

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func TestDecode(t *testing.T) {
	for in, want := range map[string]any{
		"i42e":                    int64(42),
		"i-7e":                    int64(-7),
		"i0e":                     int64(0),
		"4:spam":                  "spam",
		"0:":                      "",
		"le":                      []any{},
		"l4:spami42ee":            []any{"spam", int64(42)},
		"d3:cow3:moo4:spaml1:aee": map[string]any{"cow": "moo", "spam": []any{"a"}},
	} {
		got, err := Decode([]byte(in))
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %#v, want %#v", in, got, want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, in := range []string{"", "i", "ie", "i-0e", "i03e", "i+3e", "i1", "5:abc", "-1:a", "01:a", "l", "d", "d1:ae",
		"di1e1:ae", "x", "4:spamx", "l4:spam", "99999999999:a"} {
		if v, err := Decode([]byte(in)); !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: got %#v, %v; want a syntax error", in, v, err)
		}
	}
	deep := bytes.Repeat([]byte("l"), maxDepth+2)
	if _, err := Decode(append(deep, bytes.Repeat([]byte("e"), maxDepth+2)...)); err == nil {
		t.Error("nesting beyond maxDepth accepted")
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	v := map[string]any{"command": "offer", "sdp": []byte("v=0\r\n"), "flags": []string{"trust-address"},
		"n": 5, "list": []any{int64(-1), "x"}}
	b, err := Encode(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	want := "d7:command5:offer5:flagsl13:trust-addresse4:listli-1e1:xe1:ni5e3:sdp5:v=0\r\ne"
	if string(b) != want {
		t.Fatalf("got  %q\nwant %q", b, want)
	}
	back, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.(map[string]any)["sdp"] != "v=0\r\n" {
		t.Errorf("round trip: %#v", back)
	}
	if _, err := Encode(nil, 1.5); err == nil {
		t.Error("encoded a float")
	}
}

// FuzzDecode: no panic on any input, and what decodes re-encodes to the
// same bytes (bencode is canonical, keys sorted) unless keys were unsorted
// or repeated in the input.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"i42e", "d3:cow3:moo4:spaml1:aee", "l4:spami42ee", "d7:command4:pinge", "0:", "i-1e"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Decode(b)
		if err != nil {
			return
		}
		out, err := Encode(nil, v)
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", v, err)
		}
		v2, err := Decode(out)
		if err != nil || !reflect.DeepEqual(v, v2) {
			t.Fatalf("re-encoded %q decodes to %#v, %v; want %#v", out, v2, err, v)
		}
	})
}

// FuzzParseMessage: the server's entry point never panics.
func FuzzParseMessage(f *testing.F) {
	f.Add([]byte("5323_1 d7:command4:pinge"))
	f.Add([]byte("x d7:command5:offer7:call-id3:abc8:from-tag1:a3:sdp3:v=0e"))
	f.Add([]byte(" d7:command4:pinge"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cookie, dict, err := ParseMessage(b)
		if err == nil && (cookie == "" || dict == nil) {
			t.Fatalf("ok with cookie %q, dict %v", cookie, dict)
		}
	})
}
