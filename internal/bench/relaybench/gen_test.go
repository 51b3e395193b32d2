package relaybench

import (
	"strings"
	"testing"
	"time"

	"github.com/convene/convene/internal/relay"
	"github.com/convene/convene/internal/relay/ng"
)

// inProcess serves a real relay over ng in this process, so the generator's
// call setup, pacing and counting are tested against it without a binary.
func inProcess(t *testing.T) *Relay {
	t.Helper()
	rl, err := relay.New(relay.Options{Addr: "127.0.0.1", PortMin: 26000, PortMax: 26999, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	s, err := ng.Listen("127.0.0.1:0", rl, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := ng.Dial(s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{Name: "convene", NG: c}
	t.Cleanup(r.Stop)
	return r
}

func TestCallStepCountsEveryPacket(t *testing.T) {
	r := inProcess(t)
	st := callStep(r, 10)
	// 10 calls, 20 endpoints, 4 s at 50 packets/s each.
	if !st.Pass || st.Sent != 20*200 || st.Received != st.Sent || st.Misrouted != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestRateStep(t *testing.T) {
	r := inProcess(t)
	cs, err := setupCalls(r, 4, "rate")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.close()
	st := rateStep(r, cs.eps, 172, 4000)
	if !st.Pass || st.SentPPS < 3800 || st.DeliveredPPS != st.SentPPS {
		t.Fatalf("%+v", st)
	}
}

func TestReport(t *testing.T) {
	res := &Result{Start: time.Now(), End: time.Now(), Probe: []ProbePoint{{Size: 172, DeliveredPPS: 400000, RelayPPS: 250000}},
		Systems: []SystemResult{
			{Name: "convene", Sizes: []SizePoint{{Size: 172, Datagram: 172, DeliveredPPS: 200000, XProbe: 0.5, XRelayProbe: 0.8}}, MaxCalls: 1000,
				Steps: []CallStep{{Calls: 1000, Pass: true}}},
			{Name: "rtpengine", Error: "not installed"},
		}}
	out := FormatTables(res)
	for _, want := range []string{"| 172 | 172 | 400000 | 250000 | 200000 | 0.50 | 0.80 |", "| convene | 1000 | 100000 | 0.25 | 1 |",
		"| rtpengine | not run: not installed"} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
	md, js, err := WriteReport(t.TempDir(), res)
	if err != nil || !strings.HasSuffix(md, "-relay.md") || !strings.HasSuffix(js, "-relay.json") {
		t.Fatalf("%s %s %v", md, js, err)
	}
}
