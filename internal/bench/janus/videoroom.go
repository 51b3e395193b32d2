package janus

import (
	"context"
	"fmt"
	"strings"
)

// The VideoRoom plugin's requests the WebRTC benchmarks make: a publisher
// joins a room with its SDP offer; a subscriber joins with the feeds it
// wants, is offered their streams and starts with its answer.

// Publish joins room as a publisher (display) on a handle of its own with
// an SDP offer, and returns the handle, Janus's answer and the feed ID.
func (s *Session) Publish(ctx context.Context, room int, display, offer string) (*Handle, string, int64, error) {
	h, err := s.Attach(ctx, "janus.plugin.videoroom")
	if err != nil {
		return nil, "", 0, err
	}
	ev, err := h.Message(ctx, map[string]any{"request": "joinandconfigure", "ptype": "publisher", "room": room, "display": display,
		"audio": true, "video": true}, map[string]any{"type": "offer", "sdp": offer}, "joined")
	if err != nil {
		return nil, "", 0, err
	}
	id, _ := Data(ev)["id"].(float64)
	return h, SDP(ev), int64(id), nil
}

// Subscribe joins room as a subscriber of feeds (every stream of each) on
// a handle of its own and returns the handle and Janus's offer; Start
// answers it.
func (s *Session) Subscribe(ctx context.Context, room int, feeds []int64) (*Handle, string, error) {
	h, err := s.Attach(ctx, "janus.plugin.videoroom")
	if err != nil {
		return nil, "", err
	}
	var streams []map[string]any
	for _, f := range feeds {
		streams = append(streams, map[string]any{"feed": f})
	}
	ev, err := h.Message(ctx, map[string]any{"request": "join", "ptype": "subscriber", "room": room, "streams": streams}, nil, "attached")
	if err != nil {
		return nil, "", err
	}
	return h, SDP(ev), nil
}

// Start answers a subscriber's offer.
func (h *Handle) Start(ctx context.Context, answer string) error {
	_, err := h.Message(ctx, map[string]any{"request": "start"}, map[string]any{"type": "answer", "sdp": answer}, "event")
	return err
}

// VideoMid finds the mid of an SDP's first video section.
func VideoMid(sdp string) string {
	video := false
	for _, l := range strings.Split(sdp, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "m=") {
			video = strings.HasPrefix(l, "m=video")
		}
		if video && strings.HasPrefix(l, "a=mid:") {
			return strings.TrimPrefix(l, "a=mid:")
		}
	}
	return ""
}

// CreateRoom creates a VideoRoom room on h with the given settings added
// to {"request": "create", "room": room}.
func (h *Handle) CreateRoom(ctx context.Context, room int, settings map[string]any) error {
	body := map[string]any{"request": "create", "room": room}
	for k, v := range settings {
		body[k] = v
	}
	if _, err := h.Request(ctx, body); err != nil {
		return fmt.Errorf("create room %d: %w", room, err)
	}
	return nil
}
