package session

import (
	"errors"
	"net/netip"
	"time"

	"github.com/convene/convene/internal/floor"
	"github.com/convene/convene/internal/rtplink"
)

// Session states (the XGSP lifecycle of the global-mmcs seed).
const (
	StateCreated     = "created"
	StateCanceled    = "canceled"
	StateActivated   = "activated"
	StateDeactivated = "deactivated"
	StateFinished    = "finished"
)

// Link types.
const (
	LinkRTP       = "rtp"
	LinkMulticast = "multicast"
)

// Errors of the service, each mapped to an HTTP status by the API.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrInvalid  = errors.New("invalid")
	ErrDraining = errors.New("node is draining")
	// ErrLimit: a configured cap (sessions, members, links) is reached.
	ErrLimit = errors.New("limit reached")
	// ErrForbidden: a join token that is revoked, used up or unknown.
	ErrForbidden = errors.New("forbidden")
	// ErrUnavailable: the node cannot take on the work now (its mixing
	// capacity is used up).
	ErrUnavailable = errors.New("unavailable")
)

// Session is a session as the API shows it.
type Session struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Links     []Link    `json:"links"`
	Tracks    []Track   `json:"tracks"`
	// StartAt and EndAt are the schedule, if any.
	StartAt *time.Time `json:"start_at,omitempty"`
	EndAt   *time.Time `json:"end_at,omitempty"`
	// Members counts the members; Floors are the floors while not over.
	Members int           `json:"members"`
	Floors  []floor.State `json:"floors,omitempty"`
	// Owner is the node that owns the session (its lease in the catalog,
	// in a cluster) and OwnerEpoch the lease's fencing token; only Get
	// fills them in.
	Owner      string `json:"owner,omitempty"`
	OwnerEpoch int64  `json:"owner_epoch,omitempty"`
}

// Track is a broker track with its counters.
type Track struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	Publisher   string `json:"publisher"`
	Subscribers int    `json:"subscribers"`
	Packets     uint64 `json:"packets"`
	Bytes       uint64 `json:"bytes"`
	// Gated is set while floor control (or the member's own mute, for a
	// phone) stops the publisher; FloorDropped counts the packets it dropped.
	Gated        bool   `json:"gated"`
	FloorDropped uint64 `json:"floor_dropped"`
}

// Link is a media link with its counters.
type Link struct {
	ID         string    `json:"id"`
	Member     string    `json:"member,omitempty"`
	Type       string    `json:"type"`
	Kind       string    `json:"kind"`
	Direction  string    `json:"direction"`
	Remote     string    `json:"remote"`
	RemoteRTCP string    `json:"remote_rtcp,omitempty"`
	RTCPMux    bool      `json:"rtcp_mux"`
	TTL        int       `json:"ttl,omitempty"`
	Interface  string    `json:"interface,omitempty"`
	Mix        string    `json:"mix,omitempty"`
	Codec      string    `json:"codec,omitempty"`
	Local      Local     `json:"local"`
	Source     string    `json:"source,omitempty"` // a WebRTC link's: camera, microphone, screen
	CreatedAt  time.Time `json:"created_at"`
	Stats      LinkStats `json:"stats"`
}

// Local is where the endpoint sends to.
type Local struct {
	Addr     string `json:"addr"`
	RTPPort  int    `json:"rtp_port"`
	RTCPPort int    `json:"rtcp_port"`
}

// LinkStats are a link's counters.
type LinkStats struct {
	PacketsIn  uint64            `json:"packets_in"`
	BytesIn    uint64            `json:"bytes_in"`
	RTCPIn     uint64            `json:"rtcp_in"`
	PacketsOut uint64            `json:"packets_out"`
	BytesOut   uint64            `json:"bytes_out"`
	RTCPOut    uint64            `json:"rtcp_out"`
	Dropped    map[string]uint64 `json:"dropped"`
	// Quality is what a plain RTP endpoint's receiver reports say of the
	// streams the node sends it (rtplink.Quality); absent for other
	// kinds of link and before its first report.
	Quality *rtplink.Quality `json:"quality,omitempty"`
}

// NewRTPLink is a request to attach a plain RTP endpoint.
type NewRTPLink struct {
	Remote     string `json:"remote"`
	RemoteRTCP string `json:"remote_rtcp,omitempty"`
	RTCPMux    bool   `json:"rtcp_mux,omitempty"`
	Kind       string `json:"kind"`
	Direction  string `json:"direction,omitempty"`
	// Member ties the link to a session member: it carries the member's
	// role (a listener's link only receives), subgroup and floor.
	Member string `json:"member,omitempty"`
	// Mix, when set, makes the endpoint hear the session's audio mix (its
	// subgroup's, without its member's own voice) in this codec instead
	// of every member's stream: "PCMU", "PCMA", "opus/48000/2:111",
	// "L16/16000:96". Audio links only.
	Mix string `json:"mix,omitempty"`
	// Codec names what the endpoint sends, as an rtpmap entry ("VP8/90000",
	// "opus/48000/2", "video/AV1/90000" for a name the node does not know):
	// a dynamic payload type says nothing by itself, and browsers,
	// recordings and exports need to know. Empty: the static payload type
	// (PCMU, PCMA, G722) tells, or nobody knows.
	Codec string `json:"codec,omitempty"`
	// Policed is set by the API when a member, not the operator, creates
	// the link: the destination policy, the caps and consent apply.
	Policed bool `json:"-"`
	// Latch lists IPs an endpoint behind NAT may send from instead of
	// Remote (a phone's signalling source and its SDP's address): its
	// first packets from one of them, within the links' latch window,
	// make that source its address (rtplink.Config.Latch). Set by the SIP
	// gateway, never by the API; for a policed link only IPs the
	// destination policy allows are kept. Not kept in the catalog.
	Latch []netip.Addr `json:"-"`
	// LatchPT, if set, narrows the latch to RTP of the payload types it
	// accepts (a phone's audio and video links latch on one IP;
	// rtplink.Config.LatchPT). Set by the SIP gateway only.
	LatchPT func(pt uint8) bool `json:"-"`
	// From, when set, makes a receiving link hear only the tracks of that
	// member (a video phone: its session's composite); SendPT, when not
	// zero, is the payload type the endpoint takes what it receives in.
	// Set by the SIP gateway, never by the API; not kept in the catalog.
	From   string `json:"-"`
	SendPT uint8  `json:"-"`
}

// NewMulticastLink is a request to bridge a session to a multicast group.
type NewMulticastLink struct {
	Group     string `json:"group"`
	Kind      string `json:"kind"`
	Direction string `json:"direction,omitempty"`
	TTL       int    `json:"ttl,omitempty"`
	Interface string `json:"interface,omitempty"`
	// Codec names what the group carries, as for NewRTPLink.
	Codec string `json:"codec,omitempty"`
	// Member ties the group to a session member: its role, subgroup and
	// floor, and no echo of that member's own media.
	Member string `json:"member,omitempty"`
}
