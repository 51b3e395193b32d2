package export

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pion/rtcp"

	"github.com/convene/convene/internal/recorder"
	"github.com/convene/convene/internal/rtpdump"
)

// Stream is one RTP stream of a recording, placed on its time line.
type Stream struct {
	Sidecar *recorder.Sidecar
	Path    string // the rtpdump file
	Codec   string // MIME type of its first known payload type, "audio/PCMU"
	PT      uint8  // that payload type; packets of another are skipped
	Rate    uint32 // RTP clock rate
	// Start is where the stream's first RTP timestamp lies on the time
	// line; FirstTS is that timestamp. End is where its last packet ends.
	Start   time.Duration
	FirstTS uint32
	End     time.Duration
	Packets int
	// Aligned says how Start was found: "sender_report" or "arrival".
	Aligned string
	// Shift is how far the alignment moved the stream from where its
	// packets arrived: a packet's place on the time line is its arrival
	// offset plus Shift (playback replays arrivals, export timestamps).
	Shift time.Duration
}

// At returns where the RTP timestamp unwrapped (FirstTS plus ticks, as
// Unwrap counts them) lies on the time line.
func (s *Stream) At(ticks int64) time.Duration {
	return s.Start + s.ticks(ticks)
}

// Recording is a recording's streams, read from its directory.
type Recording struct {
	Dir      string
	Manifest *recorder.Manifest
	Audio    []*Stream
	Video    []*Stream
	// Duration is where the last stream ends on the time line.
	Duration time.Duration
}

// sameClock is how far a sender's NTP time may be from the node's clock
// for its streams to be aligned with other senders' by their reports.
const sameClock = time.Second

// ErrNoStreams is a recording without a stream the export can use.
var ErrNoStreams = errors.New("export: no stream of a kind this format holds")

// unwrapper turns 32-bit RTP timestamps into ticks since the first,
// across wraps (a step of less than half the range either way is taken
// as the nearest).
type unwrapper struct {
	first, last uint32
	ticks       int64
	started     bool
}

func (u *unwrapper) next(ts uint32) int64 {
	if !u.started {
		u.first, u.last, u.started = ts, ts, true
		return 0
	}
	u.ticks += int64(int32(ts - u.last))
	u.last = ts
	return u.ticks
}

// Open reads a recording's manifest and sidecars and places its streams
// (one pass over every stream file). Streams with no RTP, of an unknown
// codec, or whose file does not open are left out.
func Open(dir string) (*Recording, error) {
	m, err := recorder.ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	rec := &Recording{Dir: dir, Manifest: m}
	srs := map[uint32][]recorder.SenderReport{} // by SSRC, from every file of it
	cnames := map[uint32]string{}               // by SSRC, from SDES
	var streams []*Stream
	for _, e := range m.Streams {
		b, err := os.ReadFile(filepath.Join(dir, filepath.Base(e.Sidecar)))
		if err != nil {
			continue
		}
		sc, err := recorder.ParseSidecar(b)
		if err != nil {
			continue
		}
		srs[sc.SSRC] = append(srs[sc.SSRC], sc.SenderReports...)
		if sc.RTCPPackets > 0 {
			readCNAMEs(filepath.Join(dir, sc.File), cnames)
		}
		if sc.RTCPOnly || sc.Packets == 0 {
			continue
		}
		s := &Stream{Sidecar: sc, Path: filepath.Join(dir, sc.File), Rate: sc.ClockRate}
		for _, pt := range sc.PayloadTypes {
			if pt.Codec != "" && !strings.EqualFold(pt.Codec, "audio/telephone-event") && !strings.EqualFold(pt.Codec, "audio/CN") {
				s.Codec, s.PT = pt.Codec, pt.PT
				if pt.ClockRate != 0 {
					s.Rate = pt.ClockRate
				}
				break
			}
		}
		if s.Codec == "" && sc.Kind == "video" && len(sc.PayloadTypes) > 0 {
			// A plain RTP link's dynamic payload type names no codec: the
			// stream is taken as VP8 (at 90 kHz, RFC 7741 §4.1) if one of
			// its first packets starts a VP8 keyframe.
			s.PT, s.Rate = sc.PayloadTypes[0].PT, 90000
			if sniffVP8(s) {
				s.Codec = "video/VP8"
			}
		}
		if s.Codec == "" || s.Rate == 0 {
			continue
		}
		streams = append(streams, s)
	}
	// Arrival: for each stream the smallest (arrival − media time), the
	// packet that met the least delay.
	anchor := map[*Stream]time.Duration{}
	for _, s := range streams {
		if err := s.scan(m.Started); err != nil {
			return nil, err
		}
		anchor[s] = s.Start
	}
	// Sender reports: streams of one clock keep the offsets between them
	// that its NTP↔RTP mappings give (RFC 3550 §6.4.1); the group sits
	// where its least delayed stream arrived. One clock is one CNAME
	// (§6.5.1: the streams a receiver synchronises); without a CNAME,
	// every sender whose NTP time agrees with the node's clock within
	// sameClock (one host, or hosts kept in time by NTP) shares the wall
	// clock, and a sender off by more is a clock of its own (its member's,
	// else its endpoint's).
	groups := map[string][]*Stream{}
	ntpStart := map[*Stream]time.Duration{} // on the time line
	for _, s := range streams {
		reps := srs[s.Sidecar.SSRC]
		if len(reps) == 0 || s.Packets == 0 {
			continue
		}
		sr := reps[0]
		ticks := int64(int32(sr.RTP - s.FirstTS))
		ntpStart[s] = sr.NTPTime.Sub(m.Started) - s.ticks(ticks)
		var key string
		switch d := ntpStart[s] - anchor[s]; {
		case cnames[s.Sidecar.SSRC] != "":
			key = "cname:" + cnames[s.Sidecar.SSRC]
		case d > -sameClock && d < sameClock:
			key = "wallclock"
		case s.Sidecar.Member != "":
			key = "member:" + s.Sidecar.Member
		case s.Sidecar.Endpoint != "":
			key = "endpoint:" + s.Sidecar.Endpoint
		default:
			key = fmt.Sprint("ssrc:", s.Sidecar.SSRC)
		}
		groups[key] = append(groups[key], s)
	}
	for _, g := range groups {
		if len(g) < 2 {
			continue // alone, a mapping only repeats the arrival
		}
		var d time.Duration // NTP time − arrival, the smallest of the group
		for i, s := range g {
			if x := ntpStart[s] - anchor[s]; i == 0 || x < d {
				d = x
			}
		}
		for _, s := range g {
			shift := ntpStart[s] - d - s.Start
			s.Start += shift
			s.End += shift
			s.Shift += shift
			s.Aligned = "sender_report"
		}
	}
	if m.Ended != nil {
		// The time line runs to the recording's end, silent or still
		// after the last packet.
		rec.Duration = m.Ended.Sub(m.Started)
	}
	for _, s := range streams {
		if s.Packets == 0 {
			continue
		}
		if s.Start < 0 { // a sender whose clock runs ahead of the first arrival
			s.End -= s.Start
			s.Shift -= s.Start
			s.Start = 0
		}
		rec.Duration = max(rec.Duration, s.End)
		if strings.HasPrefix(strings.ToLower(s.Codec), "audio/") {
			rec.Audio = append(rec.Audio, s)
		} else {
			rec.Video = append(rec.Video, s)
		}
	}
	return rec, nil
}

// scan reads the stream once: its first timestamp, its arrival anchor
// (Start, Aligned "arrival"), its end and its packet count. A torn last
// record ends the stream (Repair cuts them; a recording being written may
// have one).
func (s *Stream) scan(started time.Time) error {
	ps, err := openPackets(s)
	if err != nil {
		return err
	}
	defer ps.Close()
	// The file's offsets count from its header's Start, which is the
	// manifest's Started for every file the recorder writes.
	base := ps.r.Header().Start.Sub(started)
	var lastTicks int64
	for {
		p, err := ps.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("export: %s: %w", s.Path, err)
		}
		arrival := base + time.Duration(p.Offset)*time.Millisecond
		if a := arrival - s.ticks(p.Ticks); s.Packets == 0 || a < s.Start {
			s.Start = a
		}
		if s.Packets == 0 {
			s.FirstTS = ps.u.first
		}
		lastTicks = max(lastTicks, p.Ticks)
		s.Packets++
	}
	if s.Packets == 0 {
		return nil
	}
	s.Aligned = "arrival"
	// A packet lasts 20 ms for audio, a frame interval for video: count
	// 20 ms either way.
	s.End = s.Start + s.ticks(lastTicks) + 20*time.Millisecond
	return nil
}

// ticks is a duration of n ticks of the stream's clock.
func (s *Stream) ticks(n int64) time.Duration {
	return time.Duration(n * int64(time.Second) / int64(s.Rate))
}

// readCNAMEs adds the CNAMEs of the SDES packets in a stream file's RTCP
// to cnames. A file or packet that does not parse adds nothing.
func readCNAMEs(path string, cnames map[uint32]string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	r, err := rtpdump.NewReader(f)
	if err != nil {
		return
	}
	for {
		p, err := r.Next()
		if err != nil {
			return
		}
		if !p.RTCP {
			continue
		}
		pkts, err := rtcp.Unmarshal(p.Data)
		if err != nil {
			continue
		}
		for _, pk := range pkts {
			sd, ok := pk.(*rtcp.SourceDescription)
			if !ok {
				continue
			}
			for _, c := range sd.Chunks {
				for _, it := range c.Items {
					if it.Type == rtcp.SDESCNAME && it.Text != "" {
						cnames[c.Source] = it.Text
					}
				}
			}
		}
	}
}
