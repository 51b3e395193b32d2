package recording

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/ingest"
)

// Limits of ad-hoc recordings.
const (
	// DefaultIdle ends an ad-hoc recording that has received nothing for
	// that long (since its last packet, or its start).
	DefaultIdle = time.Minute
	MaxIdle     = time.Hour
	// MaxSources caps the source prefixes a caller names.
	MaxSources = 16
)

// NewAdHoc asks for an ad-hoc recording: an endpoint with no session that
// records whatever RTP its sources send it (Voyager's recording endpoint).
type NewAdHoc struct {
	Owner       string
	Title       string
	Description string
	// Sources may send; at least one.
	Sources []netip.Prefix
	// PayloadTypes name the codecs of the dynamic payload types the
	// sources send; RFC 3551's static ones need no name.
	PayloadTypes ingest.PayloadTypes
	// Idle ends the recording after that long without a packet; 0 means
	// DefaultIdle.
	Idle time.Duration
}

// Endpoint is where an ad-hoc recording takes RTP, and what it took.
type Endpoint struct {
	RTP     string            `json:"rtp"`  // host:port for RTP (RTCP may be muxed there)
	RTCP    string            `json:"rtcp"` // host:port for RTCP
	Sources []string          `json:"sources"`
	IdleS   int               `json:"idle_s"`
	Packets uint64            `json:"packets"`
	Bytes   uint64            `json:"bytes"`
	Streams int               `json:"streams"`
	Dropped map[string]uint64 `json:"dropped"`
}

// AdHoc is an ad-hoc recording as the API shows it when it starts.
type AdHoc struct {
	Recording
	Endpoint Endpoint `json:"endpoint"`
}

// StartAdHoc opens an endpoint on Options.AdHocAddr and records what it
// receives, until Stop, Close, or Idle without a packet. It is admitted
// like a session's recording, with an estimate from the payload types it
// was told of (one audio stream if none).
func (s *Service) StartAdHoc(ctx context.Context, req NewAdHoc) (AdHoc, error) {
	if !s.o.AdHocAddr.IsValid() {
		return AdHoc{}, fmt.Errorf("%w: this node takes no ad-hoc recordings (no RTP address)", ErrConflict)
	}
	if err := checkText(req.Title, req.Description); err != nil {
		return AdHoc{}, err
	}
	if req.Owner == "" {
		return AdHoc{}, fmt.Errorf("%w: no owner", ErrInvalid)
	}
	if len(req.Sources) == 0 || len(req.Sources) > MaxSources {
		return AdHoc{}, fmt.Errorf("%w: name 1 to %d sources that may send", ErrInvalid, MaxSources)
	}
	switch {
	case req.Idle == 0:
		req.Idle = DefaultIdle
	case req.Idle < time.Second || req.Idle > MaxIdle:
		return AdHoc{}, fmt.Errorf("%w: idle: want 1 s to %s", ErrInvalid, MaxIdle)
	}
	if n := s.adHocCount(); n >= s.o.AdHocMax {
		s.o.Metrics.refused.WithLabelValues("adhoc").Inc()
		return AdHoc{}, fmt.Errorf("%w: %d ad-hoc recordings run, the node's cap (recording.adhoc_max)", ErrCapacity, n)
	}
	audio, video := req.PayloadTypes.Kinds()
	need := max(float64(audio*AudioEstimate+video*VideoEstimate), AudioEstimate)
	room := broker.NewRoom("adhoc")
	l, err := s.launch(ctx, NewRecording{Owner: req.Owner, Title: req.Title, Description: req.Description}, room,
		need, audio+video, func() (*ingest.Endpoint, error) {
			return ingest.Open(ingest.Config{Addr: s.o.AdHocAddr, Sources: req.Sources, PayloadTypes: req.PayloadTypes,
				Room: room, Metrics: s.o.Ingest})
		})
	if err != nil {
		room.Close()
		return AdHoc{}, err
	}
	l.idle = req.Idle
	l.sources = req.Sources
	s.bg.Add(1)
	go s.idle(l)
	return AdHoc{Recording: view(l.cat), Endpoint: l.endpoint()}, nil
}

func (s *Service) adHocCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.live {
		if l.ep != nil {
			n++
		}
	}
	return n
}

// idle stops an ad-hoc recording once it has heard nothing for its idle
// time.
func (s *Service) idle(l *running) {
	defer s.bg.Done()
	tick := time.NewTicker(min(l.idle/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-l.ended:
			return
		case <-tick.C:
			last := l.ep.Stats().Last
			if last.IsZero() {
				last = l.cat.StartedAt
			}
			if time.Since(last) >= l.idle {
				s.log.Info("ad-hoc recording idle, stopping", "recording", l.cat.ID, "idle", l.idle)
				go s.Stop(context.Background(), l.cat.ID)
				return
			}
		}
	}
}

// endpoint shows an ad-hoc recording's endpoint.
func (l *running) endpoint() Endpoint {
	st := l.ep.Stats()
	e := Endpoint{RTP: l.ep.RTP().String(), RTCP: l.ep.RTCP().String(), IdleS: int(l.idle / time.Second),
		Packets: st.Packets, Bytes: st.Bytes, Streams: st.Streams, Dropped: st.Dropped, Sources: []string{}}
	for _, p := range l.sources {
		e.Sources = append(e.Sources, p.String())
	}
	return e
}
