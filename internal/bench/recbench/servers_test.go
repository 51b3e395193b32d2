package recbench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/rtctest"
)

// recordOneRoom sets up one room of two streams on srv, sends for a while
// and checks that both recordings hold packets of the window and the
// listener hears both streams: a report never shows a server losing for
// a setup fault of ours. It asserts no timing: only that packets arrive.
func recordOneRoom(t *testing.T, srv server, shape string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sh := Shapes[shape]
	ss := []*stream{newStream(0, &sh, nil), newStream(1, &sh, nil)}
	defer func() {
		for _, s := range ss {
			if s.close != nil {
				s.close()
			}
		}
	}()
	l, err := srv.addRoom(ctx, 0, ss)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := newPump(1)
	defer p.close()
	for _, s := range ss {
		p.add(s)
	}
	if err := waitTracks(ctx, l, len(ss)); err != nil {
		t.Fatal(err)
	}
	before := listeners{l}.snapshot()
	n0 := []uint32{ss[0].next.Load(), ss[1].next.Load()}
	time.Sleep(2 * time.Second)
	ws := windows{newWindow(n0[0], ss[0].next.Load()), newWindow(n0[1], ss[1].next.Load())}
	live := listeners{l}.snapshot().since(before)
	f := newFiles(srv.recordings())
	_ = rtctest.WaitFor(ctx, func() bool {
		f.scan(ws.mark)
		return ws[0].got > 0 && ws[1].got > 0
	})
	if ws[0].got == 0 || ws[1].got == 0 || f.Bad > 0 {
		t.Fatalf("recorded %d and %d of %d and %d packets (%d files, %d records, %d unmarked, %d bad: %v)",
			ws[0].got, ws[1].got, ws[0].n1-ws[0].n0, ws[1].n1-ws[1].n0, len(f.tails), f.Records, f.Unmarked, f.Bad, f.BadErr)
	}
	if live.Received == 0 {
		t.Fatalf("the listener received nothing: %+v", live)
	}
	t.Logf("%s: recorded %d/%d and %d/%d; live %+v", shape, ws[0].got, ws[0].n1-ws[0].n0, ws[1].got, ws[1].n1-ws[1].n0, live)
}

func TestJanusRecords(t *testing.T) {
	if _, err := exec.LookPath("janus"); err != nil {
		t.Skip("janus is not installed (make bench installs it)")
	}
	for _, shape := range []string{"128k", "5M"} {
		t.Run(shape, func(t *testing.T) {
			dir := t.TempDir()
			j, err := startJanus(context.Background(), Config{Tmp: dir}, shape, filepath.Join(dir, "rec"))
			if err != nil {
				t.Fatal(err)
			}
			defer j.stop()
			recordOneRoom(t, j, shape)
		})
	}
}

func TestConveneRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "convene")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/convene/convene/cmd/convene").CombinedOutput(); err != nil {
		t.Fatalf("building convene: %v\n%s", err, out)
	}
	for _, sys := range []string{"convene", PlainSystem} {
		for _, shape := range []string{"128k", "5M"} {
			t.Run(sys+"/"+shape, func(t *testing.T) {
				rec := filepath.Join(t.TempDir(), "rec")
				os.MkdirAll(rec, 0o755)
				var srv server
				var err error
				if sys == PlainSystem {
					srv, err = startPlain(Config{Convene: bin, Tmp: t.TempDir()}, rec)
				} else {
					srv, err = startConvene(Config{Convene: bin, Tmp: t.TempDir()}, rec)
				}
				if err != nil {
					t.Fatal(err)
				}
				defer srv.stop()
				recordOneRoom(t, srv, shape)
				if d, f := srv.drops(); d != 0 || f != 0 {
					t.Errorf("the node says it dropped %v packets it should have recorded, %v it should have forwarded", d, f)
				}
			})
		}
	}
}
