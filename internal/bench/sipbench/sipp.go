package sipbench

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

//go:embed scenarios/*.xml
var scenarioFS embed.FS

// writeScenarios copies the embedded SIPp scenarios into dir.
func writeScenarios(dir string) error {
	entries, err := scenarioFS.ReadDir("scenarios")
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := scenarioFS.ReadFile("scenarios/" + e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// sippStats is the last line of SIPp's -trace_stat file.
type sippStats struct {
	CallRate   float64 `json:"call_rate"` // calls created per second over the run
	Successful int     `json:"successful"`
	Failed     int     `json:"failed"`
	Retrans    int     `json:"retransmissions"`
	// Response times in milliseconds: RTD 1 and 2 of the scenario.
	RT1Avg, RT1Std, RT2Avg, RT2Std float64
	CallLenAvg                     float64
}

// parseStats reads a SIPp -trace_stat CSV (";" separated; header first).
func parseStats(path string) (sippStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return sippStats{}, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var header, last []string
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ";")
		if header == nil {
			header = fields
			continue
		}
		if len(fields) >= len(header)-1 {
			last = fields
		}
	}
	if header == nil || last == nil {
		return sippStats{}, fmt.Errorf("sipbench: %s: no statistics", path)
	}
	get := func(name string) string {
		for i, h := range header {
			if h == name && i < len(last) {
				return strings.TrimSpace(last[i])
			}
		}
		return ""
	}
	num := func(name string) int { n, _ := strconv.Atoi(get(name)); return n }
	var s sippStats
	s.CallRate, _ = strconv.ParseFloat(get("CallRate(C)"), 64)
	s.Successful, s.Failed, s.Retrans = num("SuccessfulCall(C)"), num("FailedCall(C)"), num("Retransmissions(C)")
	s.RT1Avg, s.RT1Std = sippMillis(get("ResponseTime1(C)")), sippMillis(get("ResponseTime1StDev(C)"))
	s.RT2Avg, s.RT2Std = sippMillis(get("ResponseTime2(C)")), sippMillis(get("ResponseTime2StDev(C)"))
	s.CallLenAvg = sippMillis(get("CallLength(C)"))
	return s, nil
}

// sippMillis parses SIPp's "HH:MM:SS:mmmuuu" into milliseconds.
func sippMillis(v string) float64 {
	p := strings.Split(v, ":")
	if len(p) != 4 {
		return 0
	}
	h, _ := strconv.Atoi(p[0])
	m, _ := strconv.Atoi(p[1])
	sec, _ := strconv.Atoi(p[2])
	us, _ := strconv.Atoi(p[3])
	return float64(h*3600+m*60+sec)*1000 + float64(us)/1000
}

// sippBuffer is SIPp's socket buffer size (-buff_size; the kernel caps it
// at net.core.rmem_max). With SIPp's default of 64 KiB a burst of answers
// overflows its receive buffer while SIPp, which shares the cores with the
// server, is busy: the kernel drops them (Udp RcvbufErrors) and SIPp
// counts retransmissions that no server caused. Both systems get the same.
const sippBuffer = "4194304"

// sipp runs SIPp in dir until it exits and returns its statistics. A
// non-zero exit (some call failed) is not an error: the stats say so.
func sipp(ctx context.Context, dir string, timeout time.Duration, args ...string) (sippStats, string, error) {
	stat := filepath.Join(dir, fmt.Sprintf("stat-%d.csv", time.Now().UnixNano()))
	args = append([]string{"-i", "127.0.0.1", "-nostdin", "-auth_uri", Domain, "-buff_size", sippBuffer, "-trace_stat", "-stf", stat, "-fd", "1",
		"-timeout", strconv.Itoa(int(timeout/time.Second)) + "s", "-timeout_error"}, args...)
	ctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sipp", args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 3 * time.Second
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); ok {
		err = nil
	}
	if err != nil {
		return sippStats{}, out.String(), fmt.Errorf("sipbench: sipp: %w", err)
	}
	s, err := parseStats(stat)
	os.Remove(stat)
	return s, tail(out.String(), 2000), err
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
