package results

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	date := time.Date(2026, 11, 25, 10, 4, 5, 0, time.UTC)
	path, err := Write(dir, date, "recorder", map[string]int{"max_ok": 3}, "# report\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := dir + "/2026-11-25-100405-recorder.md"; path != want {
		t.Errorf("path %s, want %s", path, want)
	}
	if b, _ := os.ReadFile(path); string(b) != "# report\n" {
		t.Errorf("md %q", b)
	}
	var back map[string]int
	b, _ := os.ReadFile(dir + "/2026-11-25-100405-recorder.json")
	if err := json.Unmarshal(b, &back); err != nil || back["max_ok"] != 3 {
		t.Errorf("json %s: %v", b, err)
	}
	if Pass(true) != "yes" || Pass(false) != "**no**" {
		t.Error("Pass")
	}
}
