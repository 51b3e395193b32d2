package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/convene/convene/internal/recording"
)

// Recordings placed by load (issue 16: media services placed by load and
// measured delay). A recording this node refuses for its disk capacity
// (every node has its own disk, recording.capacity_mbps or the start-up
// probe) is started on the nearest node whose heartbeat says it has the
// capacity free (registry.ChooseRecorder), asked over NATS: that node
// opens the session's room if nobody there takes part yet
// (session.Service.Attend), so its recorder records what the room pulls
// over the bridge. A recording written by another node is stopped by
// asking that node the same way, whichever node the chair asked.
//
// Only nodes reach the subject (the cluster's NATS is trusted, as for
// convene.place.<node>); what a node asks another is what a chair already
// asked it, after its own authentication and quota checks.

// recordWait bounds a request to another node: the room it opens waits up
// to recording.heardWait (2 s) to hear of the session's tracks.
const recordWait = 8 * time.Second

// recordSubject is where node takes recordings placed on it.
func recordSubject(node string) string { return "convene.record." + busToken(node) }

// recordAsk is a request to another node: start a recording of Session,
// or stop Recording.
type recordAsk struct {
	Start *recording.NewRecording `json:"start,omitempty"`
	Stop  string                  `json:"stop,omitempty"`
}

// recordAnswer is its reply: the recording, or why not (Code names the
// recording package's error, so the asking node answers as it would).
type recordAnswer struct {
	Recording *recording.Recording `json:"recording,omitempty"`
	Code      string               `json:"code,omitempty"`
	Error     string               `json:"error,omitempty"`
}

// maxRecordAsk bounds a request's bytes: a session ID, an owner, a title
// and a description (recording.MaxTitle, MaxDescription) with room to spare.
const maxRecordAsk = 16 << 10

// parseRecordAsk reads a request: exactly one of start (with a session
// and an owner) and stop.
func parseRecordAsk(b []byte) (recordAsk, error) {
	var ask recordAsk
	if len(b) > maxRecordAsk {
		return ask, fmt.Errorf("%w: a request of %d bytes (at most %d)", recording.ErrInvalid, len(b), maxRecordAsk)
	}
	if err := json.Unmarshal(b, &ask); err != nil {
		return ask, fmt.Errorf("%w: %v", recording.ErrInvalid, err)
	}
	switch {
	case ask.Start != nil && ask.Stop != "":
		return ask, fmt.Errorf("%w: both start and stop", recording.ErrInvalid)
	case ask.Start != nil && (ask.Start.Session == "" || ask.Start.Owner == ""):
		return ask, fmt.Errorf("%w: start names no session or no owner", recording.ErrInvalid)
	case ask.Start == nil && ask.Stop == "":
		return ask, fmt.Errorf("%w: neither start nor stop", recording.ErrInvalid)
	}
	return ask, nil
}

// recordCodes are the recording errors a reply carries by name.
var recordCodes = map[string]error{
	"not_found": recording.ErrNotFound, "conflict": recording.ErrConflict, "invalid": recording.ErrInvalid,
	"draining": recording.ErrDraining, "capacity": recording.ErrCapacity, "quota": recording.ErrQuota,
}

func recordCode(err error) string {
	for c, e := range recordCodes {
		if errors.Is(err, e) {
			return c
		}
	}
	return "failed"
}

// takeRecordings answers other nodes' requests to start and stop
// recordings here.
func (n *Node) takeRecordings() (*nats.Subscription, error) {
	return n.bus.Conn().Subscribe(recordSubject(n.cfg.NodeID), func(m *nats.Msg) {
		ctx, cancel := context.WithTimeout(context.Background(), recordWait-time.Second)
		defer cancel()
		var rec recording.Recording
		ask, err := parseRecordAsk(m.Data)
		switch {
		case err != nil:
		case ask.Start != nil:
			rec, err = n.recordings.Start(ctx, *ask.Start)
			if err == nil {
				n.log.Info("recording placed here", "recording", rec.ID, "session", rec.Session)
			}
		default:
			rec, err = n.recordings.Stop(ctx, ask.Stop)
		}
		var ans recordAnswer
		if err != nil {
			ans.Code, ans.Error = recordCode(err), err.Error()
		} else {
			ans.Recording = &rec
		}
		b, _ := json.Marshal(ans)
		_ = m.Respond(b)
	})
}

// ask sends a request to node and returns its recording, or its error as
// the recording package's.
func (n *Node) askRecorder(ctx context.Context, node string, ask recordAsk) (recording.Recording, error) {
	b, err := json.Marshal(ask)
	if err != nil {
		return recording.Recording{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, recordWait)
	defer cancel()
	m, err := n.bus.Conn().RequestWithContext(ctx, recordSubject(node), b)
	if err != nil {
		// a node that does not answer (dead, cut off) is not this
		// node's fault: as before placement, the caller hears who it is
		return recording.Recording{}, fmt.Errorf("%w: node %s, which writes or was to write the recording, does not answer: %v",
			recording.ErrConflict, node, err)
	}
	var ans recordAnswer
	if err := json.Unmarshal(m.Data, &ans); err != nil {
		return recording.Recording{}, fmt.Errorf("node %s: %w", node, err)
	}
	if ans.Recording == nil {
		if e, ok := recordCodes[ans.Code]; ok {
			return recording.Recording{}, fmt.Errorf("%w (node %s): %s", e, node, ans.Error)
		}
		return recording.Recording{}, fmt.Errorf("node %s: %s", node, ans.Error)
	}
	return *ans.Recording, nil
}

// recordElsewhere starts req on the nearest node with the disk capacity it
// needs free (by their heartbeats), trying the next if one refuses; ok
// is false when none took it.
func (n *Node) recordElsewhere(ctx context.Context, req recording.NewRecording) (recording.Recording, bool) {
	if n.registry == nil || leaseHolder(n.cfg) == "" {
		return recording.Recording{}, false
	}
	need := 0.0
	if room := n.sessions.Room(req.Session); room != nil {
		need = recording.Estimate(room.Tracks())
	}
	for _, to := range n.registry.WithRecordingRoom(busToken(n.cfg.NodeID), need) {
		rec, err := n.askRecorder(ctx, to.ID, recordAsk{Start: &req})
		if err != nil {
			n.log.Warn("recording not placed", "session", req.Session, "on", to.ID, "err", err)
			continue
		}
		n.log.Info("recording placed", "recording", rec.ID, "session", req.Session, "on", to.ID,
			"need_bps", need, "free_bps", to.Heartbeat.RecordingFreeBps)
		return rec, true
	}
	return recording.Recording{}, false
}

// stopElsewhere stops a recording node writes.
func (n *Node) stopElsewhere(ctx context.Context, node, id string) (recording.Recording, error) {
	if node == "" || busToken(node) == busToken(n.cfg.NodeID) {
		return recording.Recording{}, fmt.Errorf("%w: recording %s is not written by another node", recording.ErrConflict, id)
	}
	return n.askRecorder(ctx, node, recordAsk{Stop: id})
}
