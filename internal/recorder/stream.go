package recorder

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/rtpdump"
)

// stream is one SSRC's file; the writer goroutine owns it.
type stream struct {
	f       *os.File
	w       *rtpdump.Writer
	side    Sidecar
	name    string // file name without extension
	track   *broker.Track
	pts     [128]bool    // payload types in side.PayloadTypes
	dirty   bool         // the sidecar changed since it was written
	synced  atomic.Int64 // bytes fsynced (stored by the syncer)
	written int64        // bytes written at the last flush
	kept    int64        // where the bytes buffered at the last tick end
	// uncached is where the pages didSync dropped from the page cache end;
	// the syncer owns it, and the writer after stopSync.
	uncached int64
	// A video stream asks its sender for a keyframe until one comes
	// (writer.go: keyed, asked).
	keyed bool
	asked time.Duration
}

// didSync notes that the first n bytes of the file are on disk and drops
// those well behind the end from the page cache. A recording is written
// once and read later, if ever: left in the cache, its pages make the
// cache grow by the recording's rate (75 MB/s at 120 streams of 5 Mb/s)
// and each new page costs more once the cache is large (on this project's
// VM, writes cost ten times as much after 3 GB, the guest's fresh memory
// backed by the host page by page; elsewhere the cache evicts what others
// use). The last cacheTail bytes stay: the pages around the write position
// (a file system's large folios reach back from it) and what a reader
// following the recording (the recording benchmark, a player) has not
// read yet. The advice is only advice: a file system that keeps its pages
// (tmpfs) keeps them.
func (s *stream) didSync(n int64) {
	s.synced.Store(n)
	end := (n - cacheTail) &^ (cacheTail - 1)
	if end <= s.uncached {
		return
	}
	if rc, err := s.f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.Fadvise(int(fd), s.uncached, end-s.uncached, unix.FADV_DONTNEED)
		})
	}
	s.uncached = end
}

// cacheTail is how much of the end of a recording's file didSync leaves in
// the page cache, at least (a power of two: twice the largest folio).
const cacheTail = 4 << 20

// streamKey tells streams apart: a track's SSRC, or an SSRC's RTCP
// without RTP (track "rtcp/<kind>").
type streamKey struct {
	track string
	ssrc  uint32
}

// newStream creates the files of a stream; n numbers it in the recording.
func newStream(dir string, n int, start time.Time, bufSize int, kind string, ssrc uint32,
	t *broker.Track, at time.Time, atMS uint32) (*stream, error) {
	name := fmt.Sprintf("%03d-%s-%08x", n, kind, ssrc)
	f, err := os.OpenFile(filepath.Join(dir, name+".rtpdump"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	s := &stream{f: f, name: name, track: t,
		w: rtpdump.NewWriter(f, rtpdump.Header{Start: start}, bufSize),
		side: Sidecar{Version: SidecarVersion, File: name + ".rtpdump", SSRC: ssrc, Kind: kind,
			PayloadTypes: []PayloadType{}, SenderReports: []SenderReport{},
			FirstPacket: at.UTC(), FirstOffsetMS: atMS, State: StateRecording}}
	if t == nil {
		s.side.RTCPOnly = true
	} else {
		info := t.Info()
		s.side.Member = t.Owner()
		if s.side.Member == "" {
			s.side.Member = t.Publisher()
		}
		s.side.Endpoint, s.side.Track = t.Publisher(), t.ID()
		s.side.Source, s.side.Layer = info.Source, info.Layer
	}
	s.dirty = true
	return s, nil
}

// sawPT notes a payload type on the stream: what the track says of its
// codec goes with the track's first payload type (the broker knows only
// one codec per track), RFC 3551's table covers the static ones, and any
// other is kept without a codec.
func (s *stream) sawPT(pt uint8) {
	if s.pts[pt] {
		return
	}
	s.pts[pt] = true
	e := PayloadType{PT: pt}
	if st, ok := static[pt]; ok {
		e = st
		e.PT = pt
	}
	if s.track != nil {
		info := s.track.Info()
		first, ok := s.track.PayloadType()
		if info.Codec != "" && (!ok || first == pt) && (pt >= 96 || strings.EqualFold(info.Codec, e.Codec)) {
			e = PayloadType{PT: pt, Codec: info.Codec, ClockRate: info.ClockRate, Channels: info.Channels, Fmtp: info.Fmtp}
		}
	}
	s.side.PayloadTypes = append(s.side.PayloadTypes, e)
	if s.side.ClockRate == 0 {
		s.side.ClockRate = e.ClockRate
	}
	s.dirty = true
}

func (s *stream) sidecarPath(dir string) string { return filepath.Join(dir, s.name+".json") }

func (s *stream) entry() StreamEntry {
	return StreamEntry{File: s.side.File, Sidecar: s.name + ".json", SSRC: s.side.SSRC, Kind: s.side.Kind,
		Member: s.side.Member, Track: s.side.Track, RTCPOnly: s.side.RTCPOnly}
}
