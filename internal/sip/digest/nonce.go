package digest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
)

// Nonces issues and checks digest Nonces (RFC 7616 section 3.3, 5.4).
//
// A nonce carries its issue time, a sequence number and a MAC, so a forged
// or corrupted nonce is detected without state:
//
//	 0                   8                   16                  28
//	+-------------------+-------------------+---------------------+
//	| issued (unix ms)  | id (sequence)     | HMAC-SHA256[:12]    |   base64url, 38 chars
//	+-------------------+-------------------+---------------------+
//
// Replay protection needs state: slot id%len(slots) keeps the highest
// nonce-count accepted for nonce id (like Kamailio's nc_array). A newer
// nonce that takes the slot evicts the older one, which is then answered
// stale; a slot costs 16 bytes, so 1<<20 slots track a million Nonces.
type Nonces struct {
	key   [32]byte
	ttl   time.Duration
	next  atomic.Uint64
	slots []nonceSlot
	mask  uint64
	locks [256]sync.Mutex
}

type nonceSlot struct {
	id  uint64
	nc  uint32
	rtx uint32 // hash of the request last accepted with nc, to let its retransmission through
}

// NonceResult is what Use found.
type NonceResult int

// What Use found.
const (
	NonceOK      NonceResult = iota
	NonceStale               // expired, evicted, or nonce-count not increasing
	NonceInvalid             // not issued by us
)

const nonceRawLen = 28

// NewNonces returns nonces valid for ttl, tracking the counts of slots
// (a power of two) nonces.
func NewNonces(ttl time.Duration, slots int) *Nonces {
	n := &Nonces{ttl: ttl, slots: make([]nonceSlot, slots), mask: uint64(slots - 1)}
	if _, err := rand.Read(n.key[:]); err != nil {
		panic("digest: no randomness: " + err.Error())
	}
	var seed [8]byte
	rand.Read(seed[:]) //nolint:errcheck // cannot fail after the read above
	n.next.Store(binary.BigEndian.Uint64(seed[:]) >> 16)
	return n
}

func (n *Nonces) mac(dst, msg []byte) []byte {
	h := hmac.New(sha256.New, n.key[:])
	h.Write(msg)
	return h.Sum(dst)
}

// Issue returns a fresh nonce and claims its slot.
func (n *Nonces) Issue(now time.Time) string {
	id := n.next.Add(1)
	var raw [nonceRawLen]byte
	binary.BigEndian.PutUint64(raw[0:8], uint64(now.UnixMilli()))
	binary.BigEndian.PutUint64(raw[8:16], id)
	var sum [sha256.Size]byte
	copy(raw[16:], n.mac(sum[:0], raw[:16]))
	i := id & n.mask
	mu := &n.locks[i%uint64(len(n.locks))]
	mu.Lock()
	n.slots[i] = nonceSlot{id: id}
	mu.Unlock()
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// Use checks nonce and records nc (1 for a client without qop). rtx
// identifies the request, so that its retransmission with the same nc is
// accepted again.
func (n *Nonces) Use(nonce string, nc uint32, rtx uint32, now time.Time) NonceResult {
	if base64.RawURLEncoding.DecodedLen(len(nonce)) != nonceRawLen {
		return NonceInvalid
	}
	var raw [nonceRawLen]byte
	if _, err := base64.RawURLEncoding.Decode(raw[:], []byte(nonce)); err != nil {
		return NonceInvalid
	}
	var sum [sha256.Size]byte
	if !hmac.Equal(n.mac(sum[:0], raw[:16])[:12], raw[16:]) {
		return NonceInvalid
	}
	issued := time.UnixMilli(int64(binary.BigEndian.Uint64(raw[0:8])))
	if now.Sub(issued) > n.ttl {
		return NonceStale
	}
	if nc == 0 {
		return NonceStale
	}
	id := binary.BigEndian.Uint64(raw[8:16])
	i := id & n.mask
	mu := &n.locks[i%uint64(len(n.locks))]
	mu.Lock()
	defer mu.Unlock()
	s := &n.slots[i]
	switch {
	case s.id != id:
		return NonceStale
	case nc > s.nc:
		s.nc, s.rtx = nc, rtx
		return NonceOK
	case nc == s.nc && rtx == s.rtx:
		return NonceOK
	}
	return NonceStale
}
