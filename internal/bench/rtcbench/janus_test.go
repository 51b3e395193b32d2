package rtcbench

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/convene/convene/internal/bench/janus"
	"github.com/convene/convene/internal/rtctest"
)

// TestJanusRoom: the benchmark's Janus peer publishes and a subscriber
// receives through it, so a report never shows Janus losing for a setup
// fault of ours.
func TestJanusRoom(t *testing.T) {
	if _, err := exec.LookPath("janus"); err != nil {
		t.Skip("janus is not installed (make bench installs it)")
	}
	j, err := startJanus(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	pub, offer, err := rtctest.NewPublisher(rtctest.Options{Audio: true, Video: true, Simulcast: true, Interface: janus.Interface})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	feed, closeJ, err := JanusPublish(ctx, j.URL, pub, offer)
	if err != nil {
		t.Fatalf("%v\n%s", err, j.Log())
	}
	defer closeJ()
	go pub.Media(ctx)
	var out, ready bytes.Buffer
	if err := RunLoad(ctx, LoadConfig{System: "janus", URL: j.URL, Feed: feed, N: 2, Window: Duration(2 * time.Second)}, &ready, &out); err != nil {
		t.Fatal(err)
	}
	var res LoadResult
	json.Unmarshal(out.Bytes(), &res)
	if res.Joined != 2 || res.Received == 0 || res.Error != "" {
		t.Fatalf("through Janus: %+v\n%s", res, j.Log())
	}
}
