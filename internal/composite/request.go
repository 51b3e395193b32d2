package composite

import (
	"fmt"
	"strings"
)

// Output codecs.
const (
	VP8  = "VP8"
	H264 = "H264"
)

// Request asks for a composite of a session.
type Request struct {
	// Layout is grid2 (the default), grid3 or speaker.
	Layout string `json:"layout,omitempty"`
	// Tracks are the cameras to show, in cell order (track or link IDs);
	// none means the session's cameras in join order (the speaker layout:
	// the active speaker's first).
	Tracks []string `json:"tracks,omitempty"`
	// Codec is VP8 (the default) or H264.
	Codec string `json:"codec,omitempty"`
	// Width, Height and FPS of the picture: 640×360 at 15 by default.
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
	FPS    int `json:"fps,omitempty"`
}

// normalize fills in the defaults and checks the request.
func (r *Request) normalize() error {
	if r.Layout == "" {
		r.Layout = Grid2
	}
	cells, ok := Cells(r.Layout, 640, 360)
	if !ok {
		return fmt.Errorf("%w: layout must be grid2, grid3 or speaker, not %q", ErrInvalid, r.Layout)
	}
	switch strings.ToUpper(r.Codec) {
	case "", VP8:
		r.Codec = VP8
	case H264, "H.264":
		r.Codec = H264
	default:
		return fmt.Errorf("%w: codec must be VP8 or H264, not %q", ErrInvalid, r.Codec)
	}
	if r.Width == 0 {
		r.Width = 640
	}
	if r.Height == 0 {
		r.Height = 360
	}
	if r.FPS == 0 {
		r.FPS = 15
	}
	if r.Width < 160 || r.Width > 1920 || r.Height < 90 || r.Height > 1080 || r.Width%2 != 0 || r.Height%2 != 0 {
		return fmt.Errorf("%w: width and height must be even, 160–1920 × 90–1080", ErrInvalid)
	}
	if r.FPS < 1 || r.FPS > 30 {
		return fmt.Errorf("%w: fps must be 1 to 30", ErrInvalid)
	}
	if len(r.Tracks) > len(cells) {
		return fmt.Errorf("%w: layout %s has %d cells, %d tracks asked for", ErrInvalid, r.Layout, len(cells), len(r.Tracks))
	}
	for _, t := range r.Tracks {
		if t == "" || len(t) > 200 {
			return fmt.Errorf("%w: a track ID must be 1 to 200 bytes", ErrInvalid)
		}
	}
	return nil
}
