package auth

import (
	"testing"
	"time"
)

func TestStamp(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := NewSigner([]byte("secret"), func() time.Time { return now })
	st := s.Stamp("hls/s_1", now.Add(time.Minute))
	if err := s.CheckStamp("hls/s_1", st); err != nil {
		t.Fatalf("own stamp: %v", err)
	}
	for name, c := range map[string]struct{ scope, stamp string }{
		"other scope": {"hls/s_2", st},
		"forged":      {"hls/s_1", st[:len(st)-2] + "AA"},
		"later exp":   {"hls/s_1", "1800000120" + st[10:]},
		"garbage":     {"hls/s_1", "x"},
		"empty":       {"hls/s_1", ""},
	} {
		if err := s.CheckStamp(c.scope, c.stamp); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := NewSigner([]byte("other"), nil).CheckStamp("hls/s_1", st); err == nil {
		t.Error("another secret's stamp accepted")
	}
	now = now.Add(time.Minute)
	if err := s.CheckStamp("hls/s_1", st); err == nil {
		t.Error("an expired stamp accepted")
	}
}
