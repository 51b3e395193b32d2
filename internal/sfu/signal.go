package sfu

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/convene/convene/internal/capacity"
)

// MaxFrame is the largest signalling frame accepted, in bytes.
const MaxFrame = 64 << 10

// Frame is one signalling message, in either direction (docs/signalling.md).
type Frame struct {
	Type      string            `json:"type"`
	PC        string            `json:"pc,omitempty"` // "pub" or "sub"
	SDP       string            `json:"sdp,omitempty"`
	Sources   map[string]string `json:"sources,omitempty"` // publisher offer: mid -> source
	Candidate *Candidate        `json:"candidate,omitempty"`
	Track     string            `json:"track,omitempty"`
	Layer     string            `json:"layer,omitempty"`
	Auto      bool              `json:"auto,omitempty"`
	Kind      string            `json:"kind,omitempty"`
	Muted     *bool             `json:"muted,omitempty"`

	// Node to browser only.
	Member     string             `json:"member,omitempty"`
	ICEServers []ICEServer        `json:"ice_servers,omitempty"`
	Tracks     []TrackDesc        `json:"tracks,omitempty"`
	Members    map[string]Quality `json:"members,omitempty"`
	Code       string             `json:"code,omitempty"`
	Message    string             `json:"message,omitempty"`
	// Alternatives, in an over_capacity error, are the cluster's nodes
	// with room for the join, most room first; in the welcome frame and a
	// "nodes" frame, the nodes a member rejoins on if this node goes
	// (Config.Failover).
	Alternatives []capacity.Alternative `json:"alternatives,omitempty"`

	raw []byte // the whole frame, marshalled once for many peers
}

// Candidate is an RTCIceCandidateInit.
type Candidate struct {
	Candidate     string  `json:"candidate"`
	SDPMid        *string `json:"sdpMid,omitempty"`
	SDPMLineIndex *uint16 `json:"sdpMLineIndex,omitempty"`
}

// ICEServer is an RTCIceServer handed to clients.
type ICEServer struct {
	URLs       []string `json:"urls" yaml:"urls"`
	Username   string   `json:"username,omitempty" yaml:"username"`
	Credential string   `json:"credential,omitempty" yaml:"credential"`
}

// TrackDesc describes a remote track of a subscriber connection.
type TrackDesc struct {
	ID     string `json:"id"`
	Stream string `json:"stream"`
	Member string `json:"member,omitempty"`
	Kind   string `json:"kind"`
	Source string `json:"source"`
	Layers int    `json:"layers,omitempty"`
}

// Quality is one member's connection quality.
type Quality struct {
	Score    string  `json:"score"`
	Loss     float64 `json:"loss"`
	RTTMs    float64 `json:"rtt_ms"`
	JitterMs float64 `json:"jitter_ms"`
}

// Errors of Decode; the frame is refused with the message.
var ErrBadFrame = errors.New("bad frame")

var sources = map[string]bool{"camera": true, "screen": true, "microphone": true}

// Decode parses and checks a browser's frame. Everything it returns has a
// known type and the fields that type needs; it never panics.
func Decode(b []byte) (Frame, error) {
	var f Frame
	if len(b) > MaxFrame {
		return f, fmt.Errorf("%w: over %d bytes", ErrBadFrame, MaxFrame)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return Frame{}, fmt.Errorf("%w: not a JSON object: %v", ErrBadFrame, err)
	}
	switch f.Type {
	case "offer":
		if f.PC != "pub" {
			return f, fmt.Errorf("%w: offers come on the publisher connection (pc \"pub\")", ErrBadFrame)
		}
		if !strings.HasPrefix(f.SDP, "v=0") {
			return f, fmt.Errorf("%w: sdp must be a session description starting with v=0", ErrBadFrame)
		}
		if len(f.Sources) > 16 {
			return f, fmt.Errorf("%w: at most 16 sources", ErrBadFrame)
		}
		for mid, s := range f.Sources {
			if len(mid) > 32 || !sources[s] {
				return f, fmt.Errorf("%w: source %q of mid %q: want camera, screen or microphone", ErrBadFrame, s, mid)
			}
		}
	case "answer":
		if f.PC != "sub" {
			return f, fmt.Errorf("%w: answers come on the subscriber connection (pc \"sub\")", ErrBadFrame)
		}
		if !strings.HasPrefix(f.SDP, "v=0") {
			return f, fmt.Errorf("%w: sdp must be a session description starting with v=0", ErrBadFrame)
		}
	case "candidate":
		if (f.PC != "pub" && f.PC != "sub") || f.Candidate == nil || len(f.Candidate.Candidate) > 512 {
			return f, fmt.Errorf("%w: a candidate needs pc (pub or sub) and a candidate", ErrBadFrame)
		}
	case "layer":
		if _, ok := parseLayer(f.Layer); !ok || f.Track == "" {
			return f, fmt.Errorf("%w: layer needs a track and one of low, mid, high, auto", ErrBadFrame)
		}
	case "mute":
		if (f.Kind != "audio" && f.Kind != "video") || f.Muted == nil {
			return f, fmt.Errorf("%w: mute needs kind (audio or video) and muted", ErrBadFrame)
		}
	case "leave":
	default:
		return f, fmt.Errorf("%w: unknown type %q", ErrBadFrame, f.Type)
	}
	return f, nil
}

// parseLayer turns a layer name into 1..3, or 0 for auto.
func parseLayer(s string) (int, bool) {
	switch s {
	case "low":
		return 1, true
	case "mid":
		return 2, true
	case "high":
		return 3, true
	case "auto":
		return 0, true
	}
	return 0, false
}

var layerNames = [...]string{"auto", "low", "mid", "high"}

func layerName(l int) string {
	if l >= 0 && l < len(layerNames) {
		return layerNames[l]
	}
	return "auto"
}
