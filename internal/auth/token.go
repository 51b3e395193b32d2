package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// prefix starts every token; it names the format's version.
const prefix = "cv1."

// maxToken bounds what Parse looks at.
const maxToken = 2048

// Claims are what a token grants.
type Claims struct {
	Session string `json:"s"`
	Role    string `json:"r"`
	Expires int64  `json:"e"`
	Member  string `json:"m,omitempty"`
	Nonce   string `json:"n,omitempty"`
	// ID names a join token's record in the catalog (use count, revocation).
	ID string `json:"i,omitempty"`
}

// RoleViewer is the role of a view token: a join token (with an ID in the
// catalog) that only watches its session's broadcast (HLS) and admits its
// holder to nothing else — not as a member, not to signalling, links,
// chat or floors. It is no floor role.
const RoleViewer = "viewer"

// ExpiresAt returns the expiry as a time.
func (c Claims) ExpiresAt() time.Time { return time.Unix(c.Expires, 0).UTC() }

// Errors of Parse.
var (
	ErrMalformed = errors.New("token is malformed")
	ErrSignature = errors.New("token signature does not match")
	ErrExpired   = errors.New("token has expired")
)

// Signer signs and checks tokens with one secret.
type Signer struct {
	secret []byte
	now    func() time.Time
}

// NewSigner returns a signer; now may be nil (time.Now).
func NewSigner(secret []byte, now func() time.Time) *Signer {
	if now == nil {
		now = time.Now
	}
	return &Signer{secret: append([]byte(nil), secret...), now: now}
}

func (s *Signer) mac(msg string) []byte {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// Sign returns a token for c. An empty nonce is filled with random bytes
// so two tokens with the same claims differ.
func (s *Signer) Sign(c Claims) string {
	if c.Nonce == "" && c.Member == "" {
		c.Nonce = RandomHex(6)
	}
	body, _ := json.Marshal(c)
	head := prefix + base64.RawURLEncoding.EncodeToString(body)
	return head + "." + base64.RawURLEncoding.EncodeToString(s.mac(head))
}

// keyIDMessage is what KeyID signs: never a token's head (those start
// with "cv1."), so the ID is no signature of any token.
const keyIDMessage = "convene token key id"

// KeyID identifies the signer's secret without revealing it: the first 8
// bytes of its HMAC over a fixed message, in hex. Nodes with the same ID
// accept each other's tokens; a node publishes its ID in its heartbeats.
func (s *Signer) KeyID() string { return hex.EncodeToString(s.mac(keyIDMessage)[:8]) }

// IsToken reports whether s looks like a token rather than an API key.
func IsToken(s string) bool { return strings.HasPrefix(s, prefix) }

// Parse checks a token's signature and expiry and returns its claims.
func (s *Signer) Parse(tok string) (Claims, error) {
	if len(tok) > maxToken || !strings.HasPrefix(tok, prefix) {
		return Claims{}, ErrMalformed
	}
	i := strings.LastIndexByte(tok, '.')
	if i <= len(prefix) {
		return Claims{}, ErrMalformed
	}
	head, sig64 := tok[:i], tok[i+1:]
	sig, err := base64.RawURLEncoding.DecodeString(sig64)
	if err != nil || len(sig) != sha256.Size {
		return Claims{}, ErrMalformed
	}
	if !hmac.Equal(sig, s.mac(head)) {
		return Claims{}, ErrSignature
	}
	body, err := base64.RawURLEncoding.DecodeString(head[len(prefix):])
	if err != nil {
		return Claims{}, ErrMalformed
	}
	var c Claims
	if err := json.Unmarshal(body, &c); err != nil || c.Session == "" || c.Role == "" {
		return Claims{}, ErrMalformed
	}
	if s.now().Unix() >= c.Expires {
		return Claims{}, fmt.Errorf("%w at %s", ErrExpired, c.ExpiresAt().Format(time.RFC3339))
	}
	return c, nil
}

// Keys are the operator API keys of a node: keys given in the config, and
// SHA-256 digests of keys kept only hashed (the one a node makes for
// itself is stored that way, so the data dir holds no usable key).
type Keys struct {
	keys   []string
	hashes [][sha256.Size]byte
}

// HashKey is the hex SHA-256 digest a key is kept as.
func HashKey(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:])
}

// WithHashes returns ks that also accepts the keys whose HashKey digests
// are given; a digest that is not 64 hex characters is an error.
func (ks Keys) WithHashes(digests ...string) (Keys, error) {
	out := Keys{keys: ks.keys, hashes: append([][sha256.Size]byte(nil), ks.hashes...)}
	for _, d := range digests {
		var h [sha256.Size]byte
		b, err := hex.DecodeString(strings.TrimSpace(d))
		if err != nil || len(b) != sha256.Size {
			return Keys{}, errors.New("auth: a key digest must be 64 hex characters (SHA-256)")
		}
		copy(h[:], b)
		out.hashes = append(out.hashes, h)
	}
	return out, nil
}

// NewKeys returns the set of keys; empty strings are ignored.
func NewKeys(keys ...string) Keys {
	var out []string
	for _, k := range keys {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return Keys{keys: out}
}

// Valid reports whether k is one of the keys, in time independent of
// where k differs.
func (ks Keys) Valid(k string) bool {
	ok := 0
	for _, key := range ks.keys {
		ok |= subtle.ConstantTimeCompare([]byte(k), []byte(key))
	}
	if len(ks.hashes) > 0 {
		sum := sha256.Sum256([]byte(k))
		for _, h := range ks.hashes {
			ok |= subtle.ConstantTimeCompare(sum[:], h[:])
		}
	}
	return ok == 1 && k != ""
}

// RandomHex returns n random bytes as hex.
func RandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}
