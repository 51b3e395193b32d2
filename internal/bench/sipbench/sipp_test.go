package sipbench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStats(t *testing.T) {
	header := "StartTime;CallRate(C);SuccessfulCall(C);FailedCall(C);Retransmissions(C);ResponseTime1(C);ResponseTime1StDev(C);ResponseTime2(C);ResponseTime2StDev(C);CallLength(C);"
	rows := []string{header,
		"2026-11-22\t05:21:29.9;10;5;0;0;00:00:00:001000;00:00:00:000000;00:00:00:000000;00:00:00:000000;00:00:00:002000;",
		"2026-11-22\t05:21:31.9;9950.25;20000;3;17;00:00:00:001500;00:00:00:000250;00:00:01:000000;00:00:00:000000;00:00:00:008000;",
	}
	p := filepath.Join(t.TempDir(), "s.csv")
	os.WriteFile(p, []byte(strings.Join(rows, "\n")+"\n"), 0o644)
	s, err := parseStats(p)
	if err != nil {
		t.Fatal(err)
	}
	if s.CallRate != 9950.25 || s.Successful != 20000 || s.Failed != 3 || s.Retrans != 17 ||
		s.RT1Avg != 1.5 || s.RT1Std != 0.25 || s.RT2Avg != 1000 || s.CallLenAvg != 8 {
		t.Errorf("parsed %+v", s)
	}
	if _, err := parseStats(filepath.Join(t.TempDir(), "missing.csv")); err == nil {
		t.Error("missing file parsed")
	}
}

func TestScenariosEmbedded(t *testing.T) {
	dir := t.TempDir()
	if err := writeScenarios(dir); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"reg_fresh.xml", "reg_reuse.xml", "reg_callee.xml", "uac.xml", "uas.xml"} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil || !strings.Contains(string(b), "<scenario") {
			t.Errorf("%s: %v", n, err)
		}
	}
}
