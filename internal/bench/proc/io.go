package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Written returns the bytes a process has passed to write system calls
// (the wchar line of /proc/PID/io: files and stream sockets such as its
// NATS connection; sendto and sendmmsg of UDP are not counted there).
func Written(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, err
	}
	return parseWritten(string(b))
}

func parseWritten(s string) (uint64, error) {
	for line := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(line, "wchar:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no wchar line")
}
