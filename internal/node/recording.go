package node

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/config"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/events"
	"github.com/convene/convene/internal/floor"
	"github.com/convene/convene/internal/ingest"
	"github.com/convene/convene/internal/recorder"
	"github.com/convene/convene/internal/recording"
	"github.com/convene/convene/internal/session"
	"github.com/prometheus/client_golang/prometheus"
)

// probeSize is what the start-up disk probe writes.
const probeSize = 32 << 20

// startRecordings opens the recording service: the disk's capacity
// (configured, or probed), repair of what a crash left.
func startRecordings(ctx context.Context, cfg config.Config, cat *catalog.Store, sessions *session.Service,
	ev *events.Hub, reg prometheus.Registerer, log *slog.Logger) (*recording.Service, error) {
	root := cfg.RecordingDir()
	capacity := cfg.Recording.CapacityMbps * 1e6
	if capacity == 0 {
		bps, err := recording.ProbeDisk(root, probeSize)
		if err != nil {
			return nil, err
		}
		capacity = bps
		log.Info("recording capacity probed", "dir", root, "mbps", int(bps/1e6))
	}
	recMetrics, svcMetrics, inMetrics := recorder.NewMetrics(), recording.NewMetrics(), ingest.NewMetrics()
	recMetrics.Register(reg)
	svcMetrics.Register(reg)
	inMetrics.Register(reg)
	// Ad-hoc recordings bind the media address; none if recording.adhoc_max is 0.
	var adHoc netip.Addr
	if cfg.Recording.AdHocMax > 0 {
		if a, err := netip.ParseAddr(cfg.RTP.Addr); err == nil {
			adHoc = a.Unmap()
		}
	}
	return recording.New(ctx, recording.Options{Root: root, Catalog: cat, Rooms: sessions, Events: ev,
		Present: func(sessionID string) []recorder.Event {
			ms, err := sessions.Members(context.Background(), sessionID)
			if err != nil {
				return nil
			}
			evs := make([]recorder.Event, 0, len(ms))
			for _, m := range ms {
				evs = append(evs, recorder.Event{Kind: recorder.MemberJoined, Member: m.ID, Detail: m.Name + " (present)"})
			}
			return evs
		},
		Capacity: capacity, Quota: cfg.Recording.QuotaMB << 20, Metrics: svcMetrics,
		AdHocAddr: adHoc, AdHocMax: cfg.Recording.AdHocMax, Ingest: inMetrics,
		Recorder: recorder.Options{Metrics: recMetrics, Logger: log}, Logger: log, Node: leaseHolder(cfg)})
}

// recordingEvents passes the session's events on and puts members, floors
// and speakers on the time line of the session's recordings; a session
// leaving the activated state stops them (its room goes).
type recordingEvents struct {
	session.Publisher
	n *Node
}

func (r recordingEvents) SessionEvent(sessionID string, typ event.Type, data any) error {
	if c := r.n.chat; c != nil {
		switch typ {
		case event.Deactivated, event.Finished, event.Canceled:
			c.SessionEnded(sessionID)
		}
	}
	if k := r.n.kept; k != nil {
		switch typ {
		case event.Deactivated, event.Finished, event.Canceled:
			k.sessionEnded(sessionID)
		}
	}
	if rec := r.n.recordings; rec != nil {
		switch typ {
		case event.Deactivated, event.Finished, event.Canceled:
			rec.SessionEnded(sessionID)
		default:
			if e, ok := timelineEvent(typ, data); ok {
				rec.Note(sessionID, e)
			}
		}
	}
	if h := r.n.hls; h != nil && (typ == event.SpeakerActive || typ == event.MixerSpeakers) {
		if m, ok := data.(map[string]any); ok {
			if g, _ := m["group"].(string); g == "" {
				ms, _ := m["members"].([]string)
				h.SetSpeakers(sessionID, ms)
				if c := r.n.composites; c != nil {
					c.SetSpeakers(sessionID, ms)
				}
			}
		}
	}
	if typ == event.SpeakerActive || typ == event.MixerSpeakers {
		if m, ok := data.(map[string]any); ok {
			if g, _ := m["group"].(string); g == "" {
				ms, _ := m["members"].([]string)
				r.n.phones.SetSpeakers(sessionID, ms)
			}
		}
	}
	return r.Publisher.SessionEvent(sessionID, typ, data)
}

// timelineEvent is a session event as a recording's time line has it.
func timelineEvent(typ event.Type, data any) (recorder.Event, bool) {
	switch typ {
	case event.MemberJoined:
		if m, ok := data.(session.Member); ok {
			return recorder.Event{Kind: recorder.MemberJoined, Member: m.ID, Detail: m.Name}, true
		}
	case event.MemberLeft:
		if m, ok := data.(map[string]string); ok {
			return recorder.Event{Kind: recorder.MemberLeft, Member: m["id"]}, true
		}
	case event.FloorRequest:
		if q, ok := data.(floor.Request); ok {
			switch q.Status {
			case floor.Granted:
				return recorder.Event{Kind: recorder.FloorGranted, Member: q.Member, Floor: q.Floor}, true
			case floor.Released:
				return recorder.Event{Kind: recorder.FloorReleased, Member: q.Member, Floor: q.Floor}, true
			}
		}
	case event.SpeakerActive, event.MixerSpeakers:
		if m, ok := data.(map[string]any); ok {
			ms, _ := m["members"].([]string)
			e := recorder.Event{Kind: recorder.SpeakerChange, Detail: strings.Join(ms, ",")}
			if len(ms) > 0 {
				e.Member = ms[0]
			}
			if g, _ := m["group"].(string); g != "" || typ == event.MixerSpeakers {
				e.Detail = "mixer " + g + ": " + e.Detail
			}
			return e, true
		}
	}
	return recorder.Event{}, false
}
