package vtranscode

import (
	"strconv"
	"strings"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// Codecs a transcoder encodes, as MIME types.
const (
	VP8  = "video/VP8"
	H264 = "video/H264"
)

// Target is what a receiver takes: a codec and, if it says so, the largest
// picture and the most frames a second. Zero means no limit of its own
// (the hub's caps hold).
type Target struct {
	Codec         string
	Width, Height int
	FPS           int
}

// Within is t bounded by a width, height and frame rate too (0: no bound).
func (t Target) Within(w, h, fps int) Target {
	lower := func(v *int, bound int) {
		if bound > 0 && (*v == 0 || bound < *v) {
			*v = bound
		}
	}
	lower(&t.Width, w)
	lower(&t.Height, h)
	lower(&t.FPS, fps)
	return t
}

// sizes are the picture classes a transcoder encodes at (16:9, the
// largest that fits a receiver's limit): receivers of nearby limits share
// one child.
var sizes = [][2]int{{1920, 1080}, {1280, 720}, {960, 540}, {640, 360}, {480, 270}, {320, 180}, {160, 90}}

// rates are the frame-rate classes.
var rates = []int{60, 30, 24, 15, 10, 5}

// class is t reduced to a codec the hub encodes and the classes within
// both its own limits and the caps; ok is false for another codec.
func (t Target) class(maxW, maxH, maxFPS int) (Target, bool) {
	c, ok := Canonical(t.Codec)
	if !ok {
		return Target{}, false
	}
	w, h := maxW, maxH
	if t.Width > 0 {
		w = min(w, t.Width)
	}
	if t.Height > 0 {
		h = min(h, t.Height)
	}
	out := Target{Codec: c, Width: sizes[len(sizes)-1][0], Height: sizes[len(sizes)-1][1], FPS: rates[len(rates)-1]}
	for _, s := range sizes {
		if s[0] <= w && s[1] <= h {
			out.Width, out.Height = s[0], s[1]
			break
		}
	}
	f := maxFPS
	if t.FPS > 0 {
		f = min(f, t.FPS)
	}
	for _, r := range rates {
		if r <= f {
			out.FPS = r
			break
		}
	}
	return out, true
}

// Canonical spells a video codec's MIME type as the node does.
func Canonical(mime string) (string, bool) {
	switch {
	case strings.EqualFold(mime, VP8):
		return VP8, true
	case strings.EqualFold(mime, H264):
		return H264, true
	}
	return "", false
}

// SourceCodec is the codec of a video track: what its publisher said, else
// VP8 once it has sent (a plain RTP endpoint, as ffmpeg.VideoStream and the
// SFU read it); ok is false before that, or for a codec the node cannot
// transcode.
func SourceCodec(t *broker.Track) (string, bool) {
	if t.Kind() != media.Video {
		return "", false
	}
	if c := t.Info().Codec; c != "" {
		return Canonical(c)
	}
	if _, sent := t.PayloadType(); sent {
		return VP8, true
	}
	return "", false
}

// Needs reports whether a receiver of codec needs source t transcoded:
// its codec is known and is another; known is false while t's codec is
// not known yet.
func Needs(t *broker.Track, codec string) (needs, known bool) {
	src, ok := SourceCodec(t)
	if !ok {
		return false, t.Info().Codec != ""
	}
	return !strings.EqualFold(src, codec), true
}

// FromSDP is the Target a receiver's SDP describes for codec (a MIME
// type): its format parameters (fmtp) and image attributes (RFC 6236
// a=imageattr, the value after the payload type).
//
// Format parameters read: max-fs (frame size in 16×16 macroblocks) and
// max-fr (frames a second) of VP8 (RFC 7741 §6.1); for H.264 (RFC 6184
// §8.1) the level of profile-level-id, raised by max-fs and max-mbps
// (macroblocks a second) where they are given, as the level's table
// (ITU-T H.264 Table A-1) bounds them.
func FromSDP(codec, fmtp, imageattr string) Target {
	t := Target{Codec: codec}
	p := params(fmtp)
	fs, fr := num(p["max-fs"]), num(p["max-fr"])
	if strings.EqualFold(codec, H264) {
		if l, ok := levelOf(p["profile-level-id"]); ok {
			fs = max(fs, l.fs)
			mbps := max(num(p["max-mbps"]), l.mbps)
			if fs > 0 {
				fr = mbps / fs
			}
		}
	}
	if fs > 0 {
		t.Width, t.Height = fitMacroblocks(fs)
	}
	if fr > 0 {
		t.FPS = fr
	}
	if w, h, ok := ImageAttr(imageattr); ok {
		if t.Width == 0 || w < t.Width {
			t.Width = w
		}
		if t.Height == 0 || h < t.Height {
			t.Height = h
		}
	}
	return t
}

// fitMacroblocks is the largest picture class of at most fs macroblocks.
func fitMacroblocks(fs int) (w, h int) {
	for _, s := range sizes {
		if ((s[0]+15)/16)*((s[1]+15)/16) <= fs {
			return s[0], s[1]
		}
	}
	return sizes[len(sizes)-1][0], sizes[len(sizes)-1][1]
}

// level is an H.264 level's largest frame and macroblock rate.
type level struct{ fs, mbps int }

// levels is ITU-T H.264 Table A-1 by level_idc.
var levels = map[int]level{
	9: {99, 1485}, 10: {99, 1485}, 11: {396, 3000}, 12: {396, 6000}, 13: {396, 11880},
	20: {396, 11880}, 21: {792, 19800}, 22: {1620, 20250}, 30: {1620, 40500}, 31: {3600, 108000},
	32: {5120, 216000}, 40: {8192, 245760}, 41: {8192, 245760}, 42: {8704, 522240},
	50: {22080, 589824}, 51: {36864, 983040}, 52: {36864, 2073600},
}

// levelOf reads the level of a profile-level-id (6 hex digits: profile_idc,
// profile-iop, level_idc; RFC 6184 §8.1).
func levelOf(pli string) (level, bool) {
	if len(pli) != 6 {
		return level{}, false
	}
	v, err := strconv.ParseUint(pli[4:], 16, 8)
	if err != nil {
		return level{}, false
	}
	l, ok := levels[int(v)]
	return l, ok
}

// params splits "a=1;b=2" into its pairs, names in lower case.
func params(fmtp string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(fmtp, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		if k != "" {
			m[strings.ToLower(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// num is a positive decimal, or 0.
func num(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1<<24 {
		return 0
	}
	return n
}

// ImageAttr reads the largest picture a receiver takes from an RFC 6236
// image attribute (the value after "a=imageattr:<pt> "):
//
//	recv [x=640,y=360] [x=320,y=180]      sizes it takes
//	recv [x=[320:1280],y=[180:720]]       a range (its upper end)
//	recv [x=[320,640],y=[180,360]]        a list (its largest)
//
// Only the recv direction counts (what the receiver decodes); "*" or
// anything it cannot read gives ok false.
func ImageAttr(v string) (w, h int, ok bool) {
	f := strings.Fields(v)
	for i := 0; i < len(f); i++ {
		if f[i] != "recv" {
			continue
		}
		for _, set := range f[i+1:] {
			if set == "send" {
				break
			}
			x, y := attrValue(set, "x="), attrValue(set, "y=")
			if x > 0 && y > 0 && x*y > w*h {
				w, h, ok = x, y, true
			}
		}
	}
	return w, h, ok
}

// attrValue is the largest value of key in one [..] set of an image
// attribute: a number, a [a:b] or [a:step:b] range, or an [a,b,…] list.
func attrValue(set, key string) int {
	i := strings.Index(set, key)
	if i < 0 {
		return 0
	}
	s := set[i+len(key):]
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return 0
		}
		best := 0
		inner := s[1:end]
		sep := ","
		if strings.Contains(inner, ":") {
			sep = ":"
		}
		for _, p := range strings.Split(inner, sep) {
			best = max(best, num(p))
		}
		return best
	}
	end := strings.IndexAny(s, ",]")
	if end < 0 {
		return 0
	}
	return num(s[:end])
}
