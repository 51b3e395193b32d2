package digest

import (
	"errors"
	"strconv"
	"strings"
)

// Credentials are the fields of a Digest Authorization or
// Proxy-Authorization header (RFC 7616 section 3.4, RFC 3261 section 25.1):
//
//	Authorization: Digest username="alice", realm="example.com",
//	    nonce="...", uri="sip:example.com", response="...",
//	    algorithm=MD5, cnonce="...", qop=auth, nc=00000001
type Credentials struct {
	Username, Realm, Nonce, URI, Response, Algorithm, Cnonce, QOP, Opaque string
	NC                                                                    uint32
	// NCRaw is the nonce-count as sent, hashed into the response.
	NCRaw string
}

// ErrBadCredentials is the error of a header ParseCredentials refuses.
var ErrBadCredentials = errors.New("digest: malformed credentials")

const maxCredentials = 4096

// ParseCredentials parses a Digest Credentials header value. It takes
// "name=token" and `name="quoted string"` pairs separated by commas, with
// backslash escapes inside quotes; unknown names are ignored; a repeated
// name is an error (RFC 7616 section 3.4: each directive at most once).
func ParseCredentials(v string) (Credentials, error) {
	var c Credentials
	if len(v) > maxCredentials {
		return c, ErrBadCredentials
	}
	v = strings.TrimLeft(v, " \t")
	if len(v) < 7 || !strings.EqualFold(v[:6], "digest") || (v[6] != ' ' && v[6] != '\t') {
		return c, ErrBadCredentials
	}
	s := v[7:]
	seen := 0
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			break
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return c, ErrBadCredentials
		}
		name := strings.ToLower(strings.TrimRight(s[:eq], " \t"))
		s = strings.TrimLeft(s[eq+1:], " \t")
		var val string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			closed := false
			for ; i < len(s); i++ {
				ch := s[i]
				if ch == '\\' && i+1 < len(s) {
					i++
					b.WriteByte(s[i])
					continue
				}
				if ch == '"' {
					closed = true
					break
				}
				b.WriteByte(ch)
			}
			if !closed {
				return c, ErrBadCredentials
			}
			val, s = b.String(), s[i+1:]
		} else {
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			val, s = strings.TrimRight(s[:end], " \t"), s[end:]
			if val == "" || strings.ContainsAny(val, " \t\"") {
				return c, ErrBadCredentials
			}
		}
		bit, field := c.field(name)
		if field != nil {
			if seen&bit != 0 {
				return c, ErrBadCredentials
			}
			seen |= bit
			*field = val
		}
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			break
		}
		if s[0] != ',' {
			return c, ErrBadCredentials
		}
		s = s[1:]
	}
	if c.NCRaw != "" {
		n, err := strconv.ParseUint(c.NCRaw, 16, 32)
		if err != nil || len(c.NCRaw) != 8 {
			return c, ErrBadCredentials
		}
		c.NC = uint32(n)
	}
	return c, nil
}

func (c *Credentials) field(name string) (int, *string) {
	switch name {
	case "username":
		return 1, &c.Username
	case "realm":
		return 2, &c.Realm
	case "nonce":
		return 4, &c.Nonce
	case "uri":
		return 8, &c.URI
	case "response":
		return 16, &c.Response
	case "algorithm":
		return 32, &c.Algorithm
	case "cnonce":
		return 64, &c.Cnonce
	case "qop":
		return 128, &c.QOP
	case "nc":
		return 256, &c.NCRaw
	case "opaque":
		return 512, &c.Opaque
	}
	return 0, nil
}
