package relaybench

import (
	"testing"

	"github.com/convene/convene/internal/testutil"
)

// TestRTPEngineCall starts rtpengine and sets up and tears down calls over
// ng with the benchmark's own code, as the benchmark does.
func TestRTPEngineCall(t *testing.T) {
	testutil.NeedBinary(t, "rtpengine")
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
