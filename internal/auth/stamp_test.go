package auth

import (
	"strings"
	"testing"
	"time"
)

func TestStamp(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := NewSigner([]byte("secret"), func() time.Time { return now })
	st := s.Stamp("hls/s_1", "", now.Add(time.Minute))
	if k, err := s.CheckStamp("hls/s_1", st); err != nil || k != "" {
		t.Fatalf("own stamp: %q %v", k, err)
	}
	kst := s.Stamp("hls/s_1", "t_0123abcd", now.Add(time.Minute))
	if k, err := s.CheckStamp("hls/s_1", kst); err != nil || k != "t_0123abcd" {
		t.Fatalf("own keyed stamp: %q %v", k, err)
	}
	i := strings.IndexByte(kst, '.')
	j := i + 1 + strings.IndexByte(kst[i+1:], '.')
	for name, c := range map[string]struct{ scope, stamp string }{
		"other scope":       {"hls/s_2", st},
		"forged":            {"hls/s_1", st[:len(st)-2] + "AA"},
		"later exp":         {"hls/s_1", "1800000120" + st[10:]},
		"garbage":           {"hls/s_1", "x"},
		"empty":             {"hls/s_1", ""},
		"keyed other scope": {"hls/s_2", kst},
		"other key":         {"hls/s_1", kst[:i+1] + "t_0123abce" + kst[j:]},
		"key dropped":       {"hls/s_1", kst[:i] + "-" + kst[j+1:]},
		"key added":         {"hls/s_1", st[:10] + ".t_1." + st[11:]},
		"bad key":           {"hls/s_1", kst[:i+1] + "t-1" + kst[j:]},
		"exp with sign":     {"hls/s_1", "+" + st},
	} {
		if _, err := s.CheckStamp(c.scope, c.stamp); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewSigner([]byte("other"), nil).CheckStamp("hls/s_1", st); err == nil {
		t.Error("another secret's stamp accepted")
	}
	if got := s.Stamp("hls/s_1", "t/../x", now.Add(time.Minute)); strings.Contains(got, "/") || strings.Contains(got, ".") {
		t.Errorf("a key that is not [A-Za-z0-9_] went into the stamp: %q", got)
	}
	now = now.Add(time.Minute)
	if _, err := s.CheckStamp("hls/s_1", st); err == nil {
		t.Error("an expired stamp accepted")
	}
	if _, err := s.CheckStamp("hls/s_1", kst); err == nil {
		t.Error("an expired keyed stamp accepted")
	}
}

// FuzzCheckStamp: a stamp from a URL path is accepted only if it is one
// the signer made (its key and all), and never panics the parser.
func FuzzCheckStamp(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	s := NewSigner([]byte("secret"), func() time.Time { return now })
	f.Add(s.Stamp("hls/s_1", "", now.Add(time.Hour)), "")
	f.Add(s.Stamp("hls/s_1", "t_1", now.Add(time.Hour)), "t_1")
	f.Add("1800003600.t_1.AAAA", "t_1")
	f.Add("..", "")
	f.Fuzz(func(t *testing.T, stamp, key string) {
		k, err := s.CheckStamp("hls/s_1", stamp)
		if err != nil {
			return
		}
		if k != "" && !validStampKey(k) {
			t.Fatalf("accepted key %q", k)
		}
		exp, _, _ := strings.Cut(strings.Replace(stamp, ".", "-", 1), "-")
		var e int64
		for _, c := range exp {
			e = e*10 + int64(c-'0')
		}
		if again := s.Stamp("hls/s_1", k, time.Unix(e, 0)); again != stamp {
			t.Fatalf("accepted %q, which the signer makes as %q", stamp, again)
		}
	})
}
