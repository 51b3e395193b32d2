package brokerbench

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/convene/convene/internal/testutil"
)

func TestProbe(t *testing.T) {
	testutil.NeedBinary(t, "cc")
	bin, err := BuildProbe(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := RunProbe(ctx, bin, 50, 252, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("probe: %+v", p)
	if p.Subscribers != 50 || p.PacketSize != 252 {
		t.Errorf("probe ran %d subscribers with %d-byte packets, want 50 and 252", p.Subscribers, p.PacketSize)
	}
	if !(p.DeliveredPPS > 0) {
		t.Errorf("delivered %v packets/s, want > 0", p.DeliveredPPS)
	}
	if p.DeliveredPPS > p.SentPPS*1.01 {
		t.Errorf("delivered %v packets/s, more than the %v sent", p.DeliveredPPS, p.SentPPS)
	}
	if p.Relay {
		t.Errorf("a fan-out probe reported relay=true")
	}

	// Through the probe's relay thread every datagram still arrives, and
	// no more than were sent.
	r, err := RunRelayProbe(ctx, bin, 50, 172, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("relay probe: %+v", r)
	if !r.Relay || !(r.DeliveredPPS > 0) || r.DeliveredPPS > r.SentPPS*1.01 {
		t.Errorf("relay probe: relay=%v, delivered %v of %v packets/s sent", r.Relay, r.DeliveredPPS, r.SentPPS)
	}
}

func TestProbeParse(t *testing.T) {
	good := `{"subscribers":50,"packet_size":252,"sent_pps":1000.5,"delivered_pps":990.0,"seconds":1.002}` + "\n"
	p, err := parseProbe([]byte(good), 50, 252)
	if err != nil {
		t.Fatal(err)
	}
	if p.SentPPS != 1000.5 || p.DeliveredPPS != 990 || p.Seconds != 1.002 {
		t.Errorf("parsed %+v", p)
	}
	for _, bad := range []string{
		"",
		"usage",
		`{"subscribers":49,"packet_size":252,"sent_pps":1,"delivered_pps":1,"seconds":1}`,
		`{"subscribers":50,"packet_size":252,"sent_pps":1,"delivered_pps":1,"seconds":0}`,
		`{"subscribers":50,"packet_size":252,"sent_pps":1,"delivered_pps":1,"seconds":1,"x":1}`,
	} {
		if _, err := parseProbe([]byte(bad), 50, 252); err == nil {
			t.Errorf("parseProbe(%q) succeeded", bad)
		}
	}
}

func TestProbeUsage(t *testing.T) {
	testutil.NeedBinary(t, "cc")
	bin, err := BuildProbe(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = exec.Command(bin, "-n", "0", "-s", "252", "-t", "1").Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("bad arguments: %v, want exit status 2", err)
	}
}
