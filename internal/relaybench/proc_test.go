package relaybench

import (
	"os/exec"
	"testing"
)

// TestRTPEngineCall starts rtpengine and sets up and tears down calls over
// ng with the benchmark's own code, as the benchmark does.
func TestRTPEngineCall(t *testing.T) {
	if _, err := exec.LookPath("rtpengine"); err != nil {
		t.Skip("rtpengine is not installed (scripts/install-deps.sh bench installs it); the benchmark reports it as not run")
	}
	r, err := StartRTPEngine(portMin, portMax)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	st := callStep(r, 20)
	if !st.Pass {
		t.Fatalf("%+v\n%s", st, r.Output())
	}
}
