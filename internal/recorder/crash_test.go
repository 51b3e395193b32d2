package recorder

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// The subprocess tests re-run this test binary with childEnv set to a
// directory; the child records there until it is killed or done.
const childEnv = "CONVENE_RECORDER_CHILD"

// TestKillChild is the child of TestKill9: it records one track to which
// it publishes a packet every 2 ms, and prints each packet's sequence
// number once Publish returned. It never ends by itself.
func TestKillChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" || os.Getenv(childEnv+"_MODE") != "kill" {
		t.Skip("the child of TestKill9")
	}
	room := broker.NewRoom("s")
	tr, _ := room.Join(broker.Member{ID: "p", Kind: media.Audio, Sends: true})
	rec, err := Start(room, dir, Options{SyncEvery: -1})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	rec.Event(Event{Kind: MemberJoined, Member: "p"})
	for seq := 0; ; seq++ {
		tr.Publish(packet(rtp(0, uint16(seq), uint32(1+seq/65536), 160)))
		os.Stdout.WriteString(strconv.Itoa(seq) + "\n") // unbuffered: one write(2) a line
		time.Sleep(2 * time.Millisecond)
	}
}

// TestKill9: a recording process is killed with SIGKILL; Repair makes its
// recording readable and every packet published more than 1 s before the
// kill is there, whole and in order.
func TestKill9(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	dir := filepath.Join(t.TempDir(), "rec")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, childEnv+"_MODE=kill")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type sent struct {
		seq int
		at  time.Time
	}
	var mu sync.Mutex
	var got []sent
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if n, err := strconv.Atoi(sc.Text()); err == nil {
				mu.Lock()
				got = append(got, sent{n, time.Now()})
				mu.Unlock()
			} else {
				t.Logf("child: %s", sc.Text())
			}
		}
	}()
	time.Sleep(3 * time.Second)
	cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	cmd.Wait()
	mu.Lock()
	must := 0 // packets published more than 1 s before the kill
	for _, s := range got {
		if s.at.Before(killed.Add(-time.Second)) {
			must = s.seq + 1
		}
	}
	total := len(got)
	mu.Unlock()
	if must < 100 {
		t.Fatalf("the child published only %d packets more than 1 s before the kill (%d in all)", must, total)
	}
	reps, err := Repair(filepath.Dir(dir))
	if err != nil || len(reps) != 1 {
		t.Fatalf("Repair: %+v %v", reps, err)
	}
	m, err := ReadManifest(dir)
	if err != nil || m.State != StateInterrupted || len(m.Streams) != 1 {
		t.Fatalf("manifest %+v %v", m, err)
	}
	recs, err := readAll(t, filepath.Join(dir, m.Streams[0].File))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < must {
		t.Fatalf("%d packets on disk, but %d were published more than 1 s before the kill", len(recs), must)
	}
	for i, p := range recs {
		if !bytes.Equal(p.Data, rtp(0, uint16(i), 1, 160)) {
			t.Fatalf("packet %d differs", i)
		}
	}
	joined := false
	for _, e := range m.Events {
		joined = joined || e.Kind == MemberJoined
	}
	if !joined {
		t.Errorf("the time line lost the event before the kill: %+v", m.Events)
	}
	t.Logf("%d packets published, %d more than 1 s before the kill, %d on disk after Repair (cut %d bytes)",
		total, must, len(recs), reps[0].Cut)
}

// TestFullChild is the child of TestWriteError: with RLIMIT_FSIZE at
// 64 KiB every write past it fails (EFBIG) as on a full disk. It records
// until the recording stops itself, then checks and prints "ok".
func TestFullChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" || os.Getenv(childEnv+"_MODE") != "full" {
		t.Skip("the child of TestWriteError")
	}
	signal.Ignore(syscall.SIGXFSZ)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 64 << 10, Max: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	room := broker.NewRoom("s")
	tr, _ := room.Join(broker.Member{ID: "p", Kind: media.Audio, Sends: true})
	failed := make(chan error, 1)
	rec, err := Start(room, dir, Options{FlushEvery: 10 * time.Millisecond, OnError: func(err error) { failed <- err }})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for seq := 0; rec.Err() == nil; seq++ {
		tr.Publish(packet(rtp(0, uint16(seq), 5, 1000)))
		select {
		case <-deadline:
			t.Fatal("the recording never failed")
		default:
		}
		if seq%16 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	if !errors.Is(<-failed, syscall.EFBIG) || !errors.Is(rec.Err(), syscall.EFBIG) || !errors.Is(rec.Stop(), syscall.EFBIG) {
		t.Fatalf("error %v", rec.Err())
	}
	for i := 0; i < 100; i++ { // publishing goes on; the recorder drops
		tr.Publish(packet(rtp(0, uint16(i), 5, 1000)))
	}
	if tr.Subscribers() != 0 {
		t.Errorf("%d subscribers after the failure", tr.Subscribers())
	}
	fmt.Println("ok")
}

// TestWriteError: a write error (here the file size limit; a full disk
// fails the same way) stops the recording with a clear error and leaves
// every file readable to its last whole record.
func TestWriteError(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	dir := filepath.Join(t.TempDir(), "rec")
	cmd := exec.Command(os.Args[0], "-test.run=^TestFullChild$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, childEnv+"_MODE=full")
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("\nok\n")) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	m, err := ReadManifest(dir)
	if err != nil || m.State != StateFailed || m.Error == "" || len(m.Streams) != 1 {
		t.Fatalf("manifest %+v %v", m, err)
	}
	recs, err := readAll(t, filepath.Join(dir, m.Streams[0].File))
	if err != nil || len(recs) < 10 {
		t.Fatalf("%d records readable, %v", len(recs), err)
	}
	for i, p := range recs {
		if !bytes.Equal(p.Data, rtp(0, uint16(i), 5, 1000)) {
			t.Fatalf("record %d differs", i)
		}
	}
	if seq := binary.BigEndian.Uint16(recs[len(recs)-1].Data[2:]); int(seq) != len(recs)-1 {
		t.Fatalf("last record is packet %d of %d", seq, len(recs))
	}
	t.Logf("failed with %q after %d packets", m.Error, len(recs))
}
