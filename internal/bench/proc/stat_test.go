package proc

import (
	"os"
	"os/exec"
	"testing"
)

func TestParseCPU(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	c, err := parseCPU("cpu  100 10 50 800 20 5 5 10 7 0")
	if err != nil {
		t.Fatal(err)
	}
	if c != (CPU{Total: 1000, Busy: 170, Steal: 10}) {
		t.Errorf("parsed %+v", c)
	}
	later, _ := parseCPU("cpu  200 10 100 1600 20 5 5 60 7 0")
	if busy, steal := later.Since(c); busy != 15 || steal != 5 {
		t.Errorf("since: busy %v%%, steal %v%%; want 15 and 5", busy, steal)
	}
	if busy, steal := c.Since(c); busy != 0 || steal != 0 {
		t.Errorf("no time passed: %v %v", busy, steal)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 3 x 5 6 7 8"} {
		if _, err := parseCPU(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestReadCPU(t *testing.T) {
	c, err := ReadCPU()
	if err != nil {
		t.Fatal(err)
	}
	if c.Total == 0 || c.Busy > c.Total || c.Steal > c.Total {
		t.Errorf("this machine's /proc/stat read as %+v", c)
	}
}

func TestParseProcess(t *testing.T) {
	// A command name with a space and a ')' in it: fields count from the last ')'.
	line := "4242 (odd) name) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 1 0 1000 0 0"
	ppid, cpu, err := parseProcess(line)
	if err != nil || ppid != 17 || cpu != 3.8 {
		t.Errorf("parsed ppid %d, %v s, %v; want 17, 3.8 s", ppid, cpu, err)
	}
	for _, bad := range []string{"", "1 (x) S 2 3", "1 (x) S y 1 1 0 -1 0 0 0 0 0 1 1 0"} {
		if _, _, err := parseProcess(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestProcess reads a real child's parent and the tree's CPU time.
func TestProcess(t *testing.T) {
	self := os.Getpid()
	ppid, cpu, err := Process(self)
	if err != nil || ppid != os.Getppid() || cpu < 0 {
		t.Fatalf("this process: ppid %d (want %d), %v s, %v", ppid, os.Getppid(), cpu, err)
	}
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer Stop(child, 0)
	if ppid, _, err := Process(child.Process.Pid); err != nil || ppid != self {
		t.Errorf("child: ppid %d, %v; want %d", ppid, err, self)
	}
	if tree := TreeCPU(self); tree < cpu {
		t.Errorf("the tree used %v s, less than its root's %v s", tree, cpu)
	}
	if _, _, err := Process(-1); err == nil {
		t.Error("no error for a process that cannot exist")
	}
}
