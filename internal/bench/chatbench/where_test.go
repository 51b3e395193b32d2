package chatbench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"
)

func TestWhere(t *testing.T) {
	fn := func(id uint64, name string) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: &profile.Function{ID: id, Name: name}}}}
	}
	sqlite := fn(1, "modernc.org/sqlite/lib._sqlite3VdbeExec")
	add := fn(2, "github.com/convene/convene/internal/catalog.(*Store).AddMessage")
	accept := fn(3, "github.com/convene/convene/internal/chat.(*hub).accept")
	write := fn(4, "github.com/coder/websocket.(*Conn).Write")
	sched := fn(5, "runtime.schedule")
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{sqlite, add, accept}, Value: []int64{5, 50}}, // stored: not counted as chat
			{Location: []*profile.Location{write}, Value: []int64{3, 30}},
			{Location: []*profile.Location{accept}, Value: []int64{1, 10}},
			{Location: []*profile.Location{sched}, Value: []int64{1, 10}},
		},
		Location: []*profile.Location{sqlite, add, accept, write, sched},
	}
	for _, l := range p.Location {
		p.Function = append(p.Function, l.Line[0].Function)
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	f, _ := os.Create(path)
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := where(path)
	want := []Share{{parts[0].what, 50}, {parts[1].what, 30}, {parts[3].what, 10}, {"other (scheduler, network poller, HTTP)", 10}}
	for i, w := range want {
		if i >= len(got) || got[i] != w {
			t.Fatalf("got %v, want first %v", got, want)
		}
	}
	if where(filepath.Join(t.TempDir(), "none")) != nil {
		t.Error("a missing profile has shares")
	}
}
