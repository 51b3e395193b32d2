package node

import (
	"strings"
	"testing"
)

func TestParseCPUStat(t *testing.T) {
	stat := "cpu  300 20 30 9000 40 5 6 7 0 0\ncpu0 100 20 30 5000 40 5 6 7 0 0\ncpu1 200 0 0 4000 0 0 0 0 0 0\nintr 1 2 3\n"
	all := func(int) bool { return true }
	if got, err := parseCPUStat(strings.NewReader(stat), all); err != nil || got != (100+20+30+5+6+7+200)/100.0 {
		t.Fatalf("both CPUs: %v, %v", got, err)
	}
	if got, err := parseCPUStat(strings.NewReader(stat), func(n int) bool { return n == 1 }); err != nil || got != 2 {
		t.Fatalf("CPU 1 only (taskset): %v, %v", got, err)
	}
	for _, bad := range []string{"", "intr 1 2\n", "cpu0 1 2 3\n", "cpu0 1 2 x 4 5 6 7 8\n"} {
		if _, err := parseCPUStat(strings.NewReader(bad), all); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if s, err := machineBusySeconds(); err != nil || s <= 0 {
		t.Errorf("this machine's /proc/stat: %v %v", s, err)
	}
}
