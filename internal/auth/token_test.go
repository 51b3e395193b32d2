package auth

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTokenRoundTripAndTamper(t *testing.T) {
	now := time.Unix(1000, 0)
	s := NewSigner([]byte("secret"), func() time.Time { return now })
	tok := s.Sign(Claims{Session: "s_1", Role: "chair", Expires: 1060})
	c, err := s.Parse(tok)
	if err != nil || c.Session != "s_1" || c.Role != "chair" || c.Nonce == "" {
		t.Fatalf("%+v %v", c, err)
	}
	if !IsToken(tok) || IsToken("abc") {
		t.Fatal("IsToken")
	}
	other := NewSigner([]byte("other"), func() time.Time { return now })
	if _, err := other.Parse(tok); !errors.Is(err, ErrSignature) {
		t.Fatalf("other secret: %v", err)
	}
	// Change the role inside the claims: the signature no longer matches.
	forged := s.Sign(Claims{Session: "s_1", Role: "listener", Expires: 1060})
	mixed := forged[:strings.LastIndexByte(forged, '.')] + tok[strings.LastIndexByte(tok, '.'):]
	if _, err := s.Parse(mixed); !errors.Is(err, ErrSignature) {
		t.Fatalf("mixed: %v", err)
	}
	now = time.Unix(1060, 0)
	if _, err := s.Parse(tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
	for _, bad := range []string{"", "cv1.", "cv1..", "cv1.x.y", "nope", tok + "x", strings.Repeat("a", 5000)} {
		if _, err := s.Parse(bad); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}

func TestKeys(t *testing.T) {
	k := NewKeys("a1", " ", "b2")
	if !k.Valid("a1") || !k.Valid("b2") || k.Valid("") || k.Valid("a") || NewKeys().Valid("") {
		t.Fatal("keys")
	}
}

func FuzzParse(f *testing.F) {
	s := NewSigner([]byte("k"), func() time.Time { return time.Unix(0, 0) })
	f.Add(s.Sign(Claims{Session: "s", Role: "chair", Expires: 10}))
	f.Add("cv1.e30.AAAA")
	f.Add("cv1..")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := s.Parse(tok)
		if err == nil && (c.Session == "" || c.Role == "" || c.Expires <= 0) {
			t.Fatalf("accepted %q as %+v", tok, c)
		}
	})
}

func TestKeyID(t *testing.T) {
	a, a2, b := NewSigner([]byte("secret"), nil), NewSigner([]byte("secret"), nil), NewSigner([]byte("other"), nil)
	if a.KeyID() != a2.KeyID() || a.KeyID() == b.KeyID() || len(a.KeyID()) != 16 {
		t.Fatalf("key IDs %q %q %q: want equal for one secret, different for another, 16 hex digits", a.KeyID(), a2.KeyID(), b.KeyID())
	}
	if strings.Contains(a.KeyID(), "secret") {
		t.Fatal("the key ID shows the secret")
	}
}
