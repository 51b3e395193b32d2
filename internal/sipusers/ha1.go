package sipusers

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Digest algorithms (RFC 7616 section 6.1 names).
const (
	MD5    = "MD5"
	SHA256 = "SHA-256"
)

// HA1 returns H(username ":" realm ":" password) in lower-case hex for
// algorithm MD5 or SHA-256 (the "-sess" variants are not supported).
func HA1(algorithm, username, realm, password string) (string, error) {
	s := username + ":" + realm + ":" + password
	switch strings.ToUpper(algorithm) {
	case MD5:
		h := md5.Sum([]byte(s))
		return hex.EncodeToString(h[:]), nil
	case SHA256:
		h := sha256.Sum256([]byte(s))
		return hex.EncodeToString(h[:]), nil
	}
	return "", fmt.Errorf("sipusers: unsupported digest algorithm %q", algorithm)
}

// Errors, usable with errors.Is.
var (
	ErrInvalid  = errors.New("sipusers: invalid")
	ErrExists   = errors.New("sipusers: user exists")
	ErrNotFound = errors.New("sipusers: no such user")
)

// MaxUsernameLen bounds a username.
const MaxUsernameLen = 64

// ValidUsername reports whether name can be a SIP account: 1 to 64
// characters from the unreserved set of RFC 3261 section 25.1 (letters,
// digits and "-_.!~*'()"), plus "+", so that it is a user part that needs
// no escaping.
func ValidUsername(name string) error {
	if name == "" || len(name) > MaxUsernameLen {
		return fmt.Errorf("%w username %q: want 1 to %d characters", ErrInvalid, name, MaxUsernameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-_.!~*'()+", c) >= 0:
		default:
			return fmt.Errorf("%w username %q: character %q not allowed (use letters, digits and -_.!~*'()+)",
				ErrInvalid, name, c)
		}
	}
	return nil
}

// ValidPassword checks a new password: 4 to 128 bytes, no control characters.
// DefaultMinPassword is the shortest password accepted unless configured
// otherwise: a SIP digest can be brute-forced offline from one captured
// exchange, so length is what protects an account.
const DefaultMinPassword = 12

func ValidPassword(pw string, minLen int) error {
	if minLen < 1 {
		minLen = DefaultMinPassword
	}
	if len(pw) < minLen || len(pw) > 128 {
		return fmt.Errorf("%w password: want %d to 128 characters (sip.min_password_length)", ErrInvalid, minLen)
	}
	for i := 0; i < len(pw); i++ {
		if pw[i] < 0x20 || pw[i] == 0x7f {
			return fmt.Errorf("%w password: control characters are not allowed", ErrInvalid)
		}
	}
	return nil
}
