package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestIntLists(t *testing.T) {
	var errb bytes.Buffer
	got, ok := intLists("recorder", map[string]string{"128k": "100, 200,400", "5M": "5"}, &errb)
	if !ok || fmt.Sprint(got) != "map[128k:[100 200 400] 5M:[5]]" {
		t.Errorf("%v %v %q", got, ok, errb.String())
	}
	for _, bad := range []string{"", "1,,2", "0", "-3", "x"} {
		errb.Reset()
		if _, ok := intLists("recorder", map[string]string{"5M": bad}, &errb); ok || !strings.Contains(errb.String(), "bad steps for 5M") {
			t.Errorf("%q: accepted (%q)", bad, errb.String())
		}
	}
}

// TestReport: a run that failed writes nothing; one interrupted writes
// its steps so far and exits 1.
func TestReport(t *testing.T) {
	var out, errb bytes.Buffer
	wrote := 0
	write := func() (string, error) { wrote++; return "r.md", nil }
	format := func() string { return "# r\n" }
	if code := report("x", &out, &errb, nil, write, format); code != 0 || wrote != 1 || !strings.Contains(out.String(), "report: r.md") {
		t.Errorf("ok run: %d, wrote %d, %q", code, wrote, out.String())
	}
	if code := report("x", &out, &errb, errors.New("pin: no"), write, format); code != 1 || wrote != 1 {
		t.Errorf("failed run: %d, wrote %d", code, wrote)
	}
	if code := report("x", &out, &errb, context.Canceled, write, format); code != 1 || wrote != 2 {
		t.Errorf("interrupted run: %d, wrote %d", code, wrote)
	}
}
