package recording

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/convene/convene/internal/ingest"
	"github.com/convene/convene/internal/recorder"
	"github.com/convene/convene/internal/testutil"
)

func (f *fixture) adHocService(t *testing.T, max int) *Service {
	t.Helper()
	s, err := New(context.Background(), Options{Root: f.root, Catalog: f.cat, Rooms: f.rooms, Events: f.ev,
		AdHocAddr: netip.MustParseAddr("127.0.0.1"), AdHocMax: max, Recorder: recorder.Options{SyncEvery: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func udpConn(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func datagram(pt uint8, seq uint16, ssrc uint32, size int) []byte {
	b := make([]byte, 12+size)
	b[0], b[1] = 0x80, pt
	binary.BigEndian.PutUint16(b[2:], seq)
	binary.BigEndian.PutUint32(b[4:], uint32(seq)*3000)
	binary.BigEndian.PutUint32(b[8:], ssrc)
	for i := 12; i < len(b); i++ {
		b[i] = byte(i) ^ byte(seq)
	}
	return b
}

// readAll reads the RTP packets of an rtpdump file.
func readAll(t *testing.T, path string) [][]byte {
	t.Helper()
	var out [][]byte
	for _, p := range records(t, path) {
		if !p.RTCP {
			out = append(out, p.Data)
		}
	}
	return out
}

// TestAdHocRecordsWhatItsSourcesSend: an ad-hoc recording, with no
// session, writes each stream an RTP tool sends it byte for byte, names
// the codecs it was told of, and refuses what its cap does not allow.
func TestAdHocRecordsWhatItsSourcesSend(t *testing.T) {
	f := newFixture(t)
	s := f.adHocService(t, 1)
	ctx := context.Background()
	pts, err := ingest.ParsePayloadTypes(map[string]string{"96": "VP8/90000"})
	if err != nil {
		t.Fatal(err)
	}
	local := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	if _, err := s.StartAdHoc(ctx, NewAdHoc{Owner: Operator}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no sources: %v, want ErrInvalid", err)
	}
	a, err := s.StartAdHoc(ctx, NewAdHoc{Owner: Operator, Title: "lab", Sources: local, PayloadTypes: pts})
	if err != nil {
		t.Fatal(err)
	}
	if a.Session != "" || a.State != "recording" || a.Endpoint.RTP == "" || a.Endpoint.IdleS != 60 {
		t.Fatalf("started %+v", a)
	}
	if _, err := s.StartAdHoc(ctx, NewAdHoc{Owner: Operator, Sources: local}); !errors.Is(err, ErrCapacity) {
		t.Errorf("a second ad-hoc recording past a cap of 1: %v, want ErrCapacity", err)
	}
	dst := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(a.Endpoint.RTP))
	video, audio := udpConn(t), udpConn(t)
	var sentV, sentA [][]byte
	for i := range 200 {
		v, au := datagram(96, uint16(i), 0x71d, 900+i%300), datagram(0, uint16(i), 0xa0d, 160)
		video.WriteToUDP(v, dst)
		audio.WriteToUDP(au, dst)
		sentV, sentA = append(sentV, v), append(sentA, au)
		if i%25 == 24 {
			// Wait for what was sent so far before sending more: a
			// socket buffer overflows while a loaded machine keeps
			// the reader from running, and what UDP drops is not
			// the recorder's to write.
			want := uint64(2 * (i + 1))
			testutil.WaitFor(t, 20*time.Second, fmt.Sprintf("%d packets accepted", want), func() bool {
				d, err := s.Get(ctx, a.ID)
				return err == nil && d.Endpoint != nil && d.Endpoint.Packets == want
			})
		}
	}
	got, err := s.Stop(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "finished" || got.Streams != 2 {
		t.Errorf("stopped %+v", got)
	}
	d, err := s.Get(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Endpoint != nil {
		t.Error("a stopped recording still shows its endpoint")
	}
	byKind := map[string]File{}
	for _, file := range d.Files {
		byKind[file.Kind] = file
	}
	for kind, sent := range map[string][][]byte{"video": sentV, "audio": sentA} {
		file, ok := byKind[kind]
		if !ok {
			t.Fatalf("no %s stream in %+v", kind, d.Files)
		}
		rec := readAll(t, filepath.Join(f.root, a.ID, file.File))
		if len(rec) != len(sent) {
			t.Fatalf("%s: %d packets recorded, %d sent", kind, len(rec), len(sent))
		}
		for i := range rec {
			if string(rec[i]) != string(sent[i]) {
				t.Fatalf("%s packet %d differs from what was sent", kind, i)
			}
		}
	}
	if pt := byKind["video"].PayloadTypes; len(pt) != 1 || pt[0].Codec != "video/VP8" || pt[0].ClockRate != 90000 {
		t.Errorf("video payload types %+v", pt)
	}
	if pt := byKind["audio"].PayloadTypes; len(pt) != 1 || pt[0].Codec != "audio/PCMU" {
		t.Errorf("audio payload types %+v", pt)
	}
	if ev := f.ev.types(); len(ev) != 0 {
		t.Errorf("an ad-hoc recording told a session %v", ev)
	}
}

// TestAdHocEndsWhenIdle: a recording that hears nothing for its idle time
// ends by itself, and its port is closed.
func TestAdHocEndsWhenIdle(t *testing.T) {
	f := newFixture(t)
	s := f.adHocService(t, 0)
	ctx := context.Background()
	a, err := s.StartAdHoc(ctx, NewAdHoc{Owner: Operator, Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Idle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The catalog says finished a moment before the service lets the
	// recording go (CI once read Running() in between): both must come.
	testutil.WaitFor(t, 10*time.Second, "the idle recording ends and is let go", func() bool {
		r, err := s.Get(ctx, a.ID)
		return err == nil && r.State == "finished" && s.Running() == 0
	})
	// The port is free again: binding it works.
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(a.Endpoint.RTP)))
	if err != nil {
		t.Errorf("the endpoint's port is still held: %v", err)
	} else {
		c.Close()
	}
	if _, err := s.StartAdHoc(ctx, NewAdHoc{Owner: Operator, Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, Idle: time.Hour + time.Second}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an idle time over an hour: %v, want ErrInvalid", err)
	}
}
