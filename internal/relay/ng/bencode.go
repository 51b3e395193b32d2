package ng

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Bencode (BEP 3), the ng protocol's encoding:
//
//	integer    i<decimal>e          i42e
//	string     <length>:<bytes>     4:spam
//	list       l<values>e           l4:spami42ee
//	dictionary d<key><value>…e      d3:cow3:mooe   (keys are strings)
//
// Decoded values are int64, string, []any and map[string]any.

// Limits on decoded input, which comes from the network.
const (
	maxDepth = 32
	maxItems = 4096
)

// ErrSyntax wraps every decoding error.
var ErrSyntax = errors.New("bencode: syntax error")

type decoder struct {
	b     []byte
	pos   int
	items int
}

// Decode decodes exactly one value that fills b.
func Decode(b []byte) (any, error) {
	d := &decoder{b: b}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if d.pos != len(b) {
		return nil, d.errorf("%d trailing bytes", len(b)-d.pos)
	}
	return v, nil
}

func (d *decoder) errorf(format string, a ...any) error {
	return fmt.Errorf("%w at offset %d: %s", ErrSyntax, d.pos, fmt.Sprintf(format, a...))
}

func (d *decoder) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, d.errorf("nested deeper than %d", maxDepth)
	}
	if d.items++; d.items > maxItems {
		return nil, d.errorf("more than %d values", maxItems)
	}
	if d.pos >= len(d.b) {
		return nil, d.errorf("unexpected end")
	}
	switch c := d.b[d.pos]; {
	case c == 'i':
		d.pos++
		end := d.find('e')
		if end < 0 {
			return nil, d.errorf("unterminated integer")
		}
		s := string(d.b[d.pos:end])
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || s == "" || s[0] == '+' || (len(s) > 1 && (s[0] == '0' || s[:2] == "-0")) {
			return nil, d.errorf("bad integer %q", s)
		}
		d.pos = end + 1
		return n, nil
	case c >= '0' && c <= '9':
		return d.str()
	case c == 'l':
		d.pos++
		list := []any{}
		for {
			if d.pos >= len(d.b) {
				return nil, d.errorf("unterminated list")
			}
			if d.b[d.pos] == 'e' {
				d.pos++
				return list, nil
			}
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
	case c == 'd':
		d.pos++
		dict := map[string]any{}
		for {
			if d.pos >= len(d.b) {
				return nil, d.errorf("unterminated dictionary")
			}
			if d.b[d.pos] == 'e' {
				d.pos++
				return dict, nil
			}
			if c := d.b[d.pos]; c < '0' || c > '9' {
				return nil, d.errorf("dictionary key is not a string")
			}
			k, err := d.str()
			if err != nil {
				return nil, err
			}
			v, err := d.value(depth + 1)
			if err != nil {
				return nil, err
			}
			dict[k] = v
		}
	default:
		return nil, d.errorf("unexpected byte %q", c)
	}
}

func (d *decoder) find(c byte) int {
	for i := d.pos; i < len(d.b); i++ {
		if d.b[i] == c {
			return i
		}
	}
	return -1
}

func (d *decoder) str() (string, error) {
	colon := d.find(':')
	if colon < 0 || colon-d.pos > 9 {
		return "", d.errorf("bad string length")
	}
	s := string(d.b[d.pos:colon])
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || (len(s) > 1 && s[0] == '0') {
		return "", d.errorf("bad string length %q", s)
	}
	if n > len(d.b)-colon-1 {
		return "", d.errorf("string of %d bytes overruns the input", n)
	}
	d.pos = colon + 1 + n
	return string(d.b[colon+1 : d.pos]), nil
}

// Encode appends the encoding of v to b. v may be an integer type, string,
// []byte, []any, []string or map[string]any (keys are written sorted, as
// bencode requires).
func Encode(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case int:
		return encInt(b, int64(v)), nil
	case int64:
		return encInt(b, v), nil
	case string:
		return append(append(strconv.AppendInt(b, int64(len(v)), 10), ':'), v...), nil
	case []byte:
		return append(append(strconv.AppendInt(b, int64(len(v)), 10), ':'), v...), nil
	case []string:
		b = append(b, 'l')
		for _, s := range v {
			b, _ = Encode(b, s)
		}
		return append(b, 'e'), nil
	case []any:
		b = append(b, 'l')
		for _, e := range v {
			var err error
			if b, err = Encode(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, 'e'), nil
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, 'd')
		for _, k := range keys {
			b, _ = Encode(b, k)
			var err error
			if b, err = Encode(b, v[k]); err != nil {
				return nil, err
			}
		}
		return append(b, 'e'), nil
	}
	return nil, fmt.Errorf("bencode: cannot encode %T", v)
}

func encInt(b []byte, n int64) []byte {
	return append(strconv.AppendInt(append(b, 'i'), n, 10), 'e')
}
