package ng

import (
	"bytes"
	"errors"
	"fmt"
)

// MaxMessage is the largest control datagram read or sent.
const MaxMessage = 65507

// ParseMessage splits a datagram "<cookie> <bencoded dictionary>".
func ParseMessage(b []byte) (cookie string, dict map[string]any, err error) {
	sp := bytes.IndexByte(b, ' ')
	if sp <= 0 {
		return "", nil, errors.New("ng: no cookie")
	}
	cookie = string(b[:sp])
	v, err := Decode(b[sp+1:])
	if err != nil {
		return cookie, nil, err
	}
	dict, ok := v.(map[string]any)
	if !ok {
		return cookie, nil, fmt.Errorf("ng: message is a %T, want a dictionary", v)
	}
	return cookie, dict, nil
}

// AppendMessage appends "<cookie> <dict>" to b.
func AppendMessage(b []byte, cookie string, dict map[string]any) ([]byte, error) {
	b = append(append(b, cookie...), ' ')
	return Encode(b, dict)
}

// str returns dict[key] if it is a string.
func str(dict map[string]any, key string) string {
	s, _ := dict[key].(string)
	return s
}
