package ingest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// Codec is what a payload type carries.
type Codec struct {
	Kind media.Kind
	Info broker.TrackInfo // Codec is the MIME type, "video/VP8"
}

// known gives the media kind and the usual spelling of the codecs an
// rtpmap may name without a kind.
var known = map[string]struct {
	kind media.Kind
	name string
}{
	"opus": {media.Audio, "opus"}, "pcmu": {media.Audio, "PCMU"}, "pcma": {media.Audio, "PCMA"},
	"g722": {media.Audio, "G722"}, "l16": {media.Audio, "L16"}, "g729": {media.Audio, "G729"},
	"gsm": {media.Audio, "GSM"}, "g723": {media.Audio, "G723"}, "telephone-event": {media.Audio, "telephone-event"},
	"speex": {media.Audio, "speex"}, "ilbc": {media.Audio, "iLBC"}, "cn": {media.Audio, "CN"}, "red": {media.Audio, "red"},
	"vp8": {media.Video, "VP8"}, "vp9": {media.Video, "VP9"}, "h264": {media.Video, "H264"}, "h265": {media.Video, "H265"},
	"av1": {media.Video, "AV1"}, "h261": {media.Video, "H261"}, "h263": {media.Video, "H263"},
	"h263-1998": {media.Video, "H263-1998"}, "jpeg": {media.Video, "JPEG"},
}

// static is RFC 3551's table of static payload types.
var static = map[uint8]string{
	0: "PCMU/8000", 3: "GSM/8000", 4: "G723/8000", 8: "PCMA/8000", 9: "G722/8000", 13: "CN/8000",
	18: "G729/8000", 26: "JPEG/90000", 31: "H261/90000", 34: "H263/90000",
}

// ParseCodec reads an rtpmap entry: "VP8/90000", "opus/48000/2", or with
// the kind in front for a codec it does not know ("video/AV1X/90000").
func ParseCodec(s string) (Codec, error) {
	parts := strings.Split(strings.TrimSpace(s), "/")
	var c Codec
	if k, ok := media.ParseKind(strings.ToLower(parts[0])); ok && len(parts) > 1 {
		c.Kind, parts = k, parts[1:]
	} else if k, ok := known[strings.ToLower(parts[0])]; ok {
		c.Kind, parts[0] = k.kind, k.name
	} else {
		return Codec{}, fmt.Errorf("codec %q: unknown name; say its kind first, as in \"video/%s\"", s, s)
	}
	if k, ok := known[strings.ToLower(parts[0])]; ok && k.kind == c.Kind {
		parts[0] = k.name
	}
	if len(parts) < 2 || parts[0] == "" {
		return Codec{}, fmt.Errorf("codec %q: want name/clock-rate, as in \"VP8/90000\"", s)
	}
	rate, err := strconv.ParseUint(parts[1], 10, 32)
	if err != nil || rate < 1000 || rate > 1_000_000 {
		return Codec{}, fmt.Errorf("codec %q: clock rate %q is not 1000..1000000", s, parts[1])
	}
	c.Info = broker.TrackInfo{Codec: c.Kind.String() + "/" + parts[0], ClockRate: uint32(rate), Source: "rtp"}
	if len(parts) > 2 {
		ch, err := strconv.ParseUint(parts[2], 10, 8)
		if err != nil || ch < 1 || ch > 8 {
			return Codec{}, fmt.Errorf("codec %q: channels %q is not 1..8", s, parts[2])
		}
		c.Info.Channels = uint16(ch)
	} else if c.Kind == media.Audio {
		c.Info.Channels = 1
	}
	if len(parts) > 3 {
		return Codec{}, fmt.Errorf("codec %q: want name/clock-rate[/channels]", s)
	}
	return c, nil
}

// PayloadTypes maps payload types to codecs; Lookup adds RFC 3551's
// static ones.
type PayloadTypes map[uint8]Codec

// ParsePayloadTypes reads {"96": "VP8/90000", ...}.
func ParsePayloadTypes(m map[string]string) (PayloadTypes, error) {
	out := PayloadTypes{}
	for k, v := range m {
		pt, err := strconv.ParseUint(k, 10, 8)
		if err != nil || pt > 127 || (pt >= 72 && pt <= 76) {
			return nil, fmt.Errorf("payload type %q: want 0..127 (not 72..76, which RTCP takes)", k)
		}
		c, err := ParseCodec(v)
		if err != nil {
			return nil, fmt.Errorf("payload type %s: %w", k, err)
		}
		out[uint8(pt)] = c
	}
	return out, nil
}

// Lookup gives the codec of a payload type.
func (m PayloadTypes) Lookup(pt uint8) (Codec, bool) {
	if c, ok := m[pt]; ok {
		return c, true
	}
	if s, ok := static[pt]; ok {
		c, err := ParseCodec(s)
		return c, err == nil
	}
	return Codec{}, false
}

// Kinds counts the media kinds the map names (for an estimate of what the
// endpoint will take).
func (m PayloadTypes) Kinds() (audio, video int) {
	for _, c := range m {
		if c.Info.Codec == "audio/telephone-event" || c.Info.Codec == "audio/CN" {
			continue
		}
		if c.Kind == media.Video {
			video++
		} else {
			audio++
		}
	}
	return audio, video
}
