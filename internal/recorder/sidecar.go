package recorder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// SidecarVersion is the version of the sidecar layout written here.
const SidecarVersion = 1

// Sidecar describes one stream file.
type Sidecar struct {
	Version int    `json:"version"`
	File    string `json:"file"` // the rtpdump file, in the same directory
	SSRC    uint32 `json:"ssrc"`
	Kind    string `json:"kind"` // "audio" or "video"
	// Member is the session member whose stream it is (the track's
	// owner, else its publishing endpoint); Endpoint the broker member
	// that published it; Track the broker track.
	Member   string `json:"member,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	Track    string `json:"track,omitempty"`
	Source   string `json:"source,omitempty"` // microphone, camera, screen, composite, rtp
	Layer    int    `json:"layer,omitempty"`  // simulcast layer, 0 for none
	// RTCPOnly marks the RTCP of an SSRC that sent no RTP here (a
	// receiver's reports, or a sender report ahead of its stream).
	RTCPOnly     bool          `json:"rtcp_only,omitempty"`
	ClockRate    uint32        `json:"clock_rate,omitempty"`
	PayloadTypes []PayloadType `json:"payload_types"`
	// FirstPacket is the wall-clock arrival time of the first packet,
	// FirstOffsetMS the same on the recording's time line.
	FirstPacket   time.Time `json:"first_packet"`
	FirstOffsetMS uint32    `json:"first_offset_ms"`
	// Counts of the packets in the file; final once State is not
	// "recording".
	Packets     uint64 `json:"packets"`
	Bytes       uint64 `json:"bytes"`
	RTCPPackets uint64 `json:"rtcp_packets"`
	// SenderReports maps the sender's NTP clock to its RTP timestamps,
	// one entry per RTCP sender report, in arrival order.
	SenderReports []SenderReport `json:"sender_reports"`
	State         State          `json:"state"`
}

// PayloadType is one RTP payload type seen on a stream and what it means;
// Codec is "" when neither the track nor the static table says.
type PayloadType struct {
	PT        uint8  `json:"pt"`
	Codec     string `json:"codec,omitempty"` // MIME type, "audio/opus"
	ClockRate uint32 `json:"clock_rate,omitempty"`
	Channels  uint16 `json:"channels,omitempty"`
	Fmtp      string `json:"fmtp,omitempty"`
}

// SenderReport is the clock mapping of one RTCP sender report (RFC 3550
// §6.4.1): at NTP time NTP the sender's RTP clock read RTP.
type SenderReport struct {
	OffsetMS uint32    `json:"offset_ms"` // when it arrived
	NTP      uint64    `json:"ntp"`       // 64-bit NTP timestamp
	NTPTime  time.Time `json:"ntp_time"`  // the same, as a time
	RTP      uint32    `json:"rtp"`
	Packets  uint32    `json:"packets"` // the sender's packet count
	Octets   uint32    `json:"octets"`  // the sender's octet count
}

// ErrBadSidecar is returned by ParseSidecar for a sidecar that does not
// describe a stream.
var ErrBadSidecar = errors.New("recorder: bad sidecar")

// ParseSidecar reads a sidecar and checks it: a known version, a stream
// file name in the same directory, a kind, payload types below 128.
func ParseSidecar(b []byte) (*Sidecar, error) {
	var s Sidecar
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSidecar, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%w: data after the object", ErrBadSidecar)
	}
	switch {
	case s.Version != SidecarVersion:
		return nil, fmt.Errorf("%w: version %d", ErrBadSidecar, s.Version)
	case !validFile(s.File):
		return nil, fmt.Errorf("%w: file %q", ErrBadSidecar, s.File)
	case s.Kind != "audio" && s.Kind != "video":
		return nil, fmt.Errorf("%w: kind %q", ErrBadSidecar, s.Kind)
	case !s.State.valid():
		return nil, fmt.Errorf("%w: state %q", ErrBadSidecar, s.State)
	}
	for _, pt := range s.PayloadTypes {
		if pt.PT > 127 {
			return nil, fmt.Errorf("%w: payload type %d", ErrBadSidecar, pt.PT)
		}
	}
	return &s, nil
}

// validFile accepts a plain file name of a stream: no directories.
func validFile(name string) bool {
	return strings.HasSuffix(name, ".rtpdump") && len(name) > len(".rtpdump") &&
		!strings.ContainsAny(name, `/\`) && name != ".." && !strings.HasPrefix(name, ".")
}

// ntpTime turns a 64-bit NTP timestamp (seconds since 1900 in the high
// half, the fraction in the low) into a time.
func ntpTime(ntp uint64) time.Time {
	const epoch = 2208988800 // 1900 to 1970
	sec := int64(ntp>>32) - epoch
	frac := (ntp & 0xffffffff) * 1e9 >> 32
	return time.Unix(sec, int64(frac)).UTC()
}

// static is RFC 3551's table of static payload types.
var static = map[uint8]PayloadType{
	0: {Codec: "audio/PCMU", ClockRate: 8000, Channels: 1}, 3: {Codec: "audio/GSM", ClockRate: 8000, Channels: 1},
	4: {Codec: "audio/G723", ClockRate: 8000, Channels: 1}, 8: {Codec: "audio/PCMA", ClockRate: 8000, Channels: 1},
	9: {Codec: "audio/G722", ClockRate: 8000, Channels: 1}, 13: {Codec: "audio/CN", ClockRate: 8000, Channels: 1},
	18: {Codec: "audio/G729", ClockRate: 8000, Channels: 1}, 26: {Codec: "video/JPEG", ClockRate: 90000},
	31: {Codec: "video/H261", ClockRate: 90000}, 32: {Codec: "video/MPV", ClockRate: 90000},
	34: {Codec: "video/H263", ClockRate: 90000},
}
