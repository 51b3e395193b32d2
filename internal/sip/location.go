package sip

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emiago/sipgo/sip"

	"github.com/convene/convene/internal/catalog"
)

// binding is one registered contact of a user.
type binding struct {
	user      string
	contact   string  // Contact URI as registered (the key)
	uri       sip.Uri // parsed contact
	callID    string
	cseq      uint32
	expires   time.Time
	transport string // "udp" or "tcp": how the REGISTER came
	source    string // ip:port the REGISTER came from
	nat       bool
	userAgent string
	updated   time.Time
}

// dest returns the transport and host:port to send requests for this
// contact to: the REGISTER's source for NATed clients and on TCP (the
// client's own connection), else the contact itself.
func (b *binding) dest() (transport, addr string) {
	if b.nat || b.transport == "tcp" {
		return b.transport, b.source
	}
	tp := b.transport
	if t, ok := b.uri.UriParams.Get("transport"); ok && t != "" {
		tp = t
	}
	port := b.uri.Port
	if port == 0 {
		port = 5060
	}
	return tp, hostPort(b.uri.Host, port)
}

type bindingKey struct{ user, contact string }

// location is the registrar's location service: bindings in memory, the
// catalog written behind. Lock order: mu, then pending's lock (never the
// reverse).
type location struct {
	cat *catalog.Store
	log *slog.Logger
	now func() time.Time

	mu        sync.RWMutex
	byUser    map[string][]*binding
	byContact map[string]*binding
	count     int

	pmu     sync.Mutex
	upserts map[bindingKey]catalog.SIPBinding
	removes map[bindingKey]struct{}
	seq     uint64 // numbers every change marked for the catalog

	// fmu serializes flushes, so durable only moves forward.
	fmu     sync.Mutex
	durable atomic.Uint64 // every change numbered up to this is in the catalog
}

func newLocation(cat *catalog.Store, log *slog.Logger, now func() time.Time) *location {
	return &location{cat: cat, log: log, now: now, byUser: map[string][]*binding{},
		byContact: map[string]*binding{}, upserts: map[bindingKey]catalog.SIPBinding{}, removes: map[bindingKey]struct{}{}}
}

// load reads the unexpired bindings from the catalog.
func (l *location) load(ctx context.Context) error {
	if l.cat == nil {
		return nil
	}
	bs, err := l.cat.SIPBindings(ctx, l.now())
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, cb := range bs {
		b := &binding{user: cb.Username, contact: cb.Contact, callID: cb.CallID, cseq: cb.CSeq,
			expires: cb.ExpiresAt, nat: cb.NAT, userAgent: cb.UserAgent, updated: cb.UpdatedAt}
		if err := sip.ParseUri(cb.Contact, &b.uri); err != nil {
			l.log.Warn("sip: skipping stored binding with a bad contact", "user", cb.Username, "contact", cb.Contact)
			continue
		}
		b.transport, b.source = splitSource(cb.Source)
		l.putLocked(b)
	}
	return nil
}

func splitSource(s string) (transport, addr string) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return s[:i], s[i+1:]
		}
	}
	return "udp", s
}

func (l *location) putLocked(b *binding) {
	list := l.byUser[b.user]
	for i, old := range list {
		if old.contact == b.contact {
			list[i] = b
			l.byContact[b.contact] = b
			return
		}
	}
	l.byUser[b.user] = append(list, b)
	l.byContact[b.contact] = b
	l.count++
}

func (l *location) removeLocked(user, contact string) bool {
	list := l.byUser[user]
	for i, b := range list {
		if b.contact == contact {
			list = append(list[:i], list[i+1:]...)
			if len(list) == 0 {
				delete(l.byUser, user)
			} else {
				l.byUser[user] = list
			}
			if l.byContact[contact] == b {
				delete(l.byContact, contact)
			}
			l.count--
			return true
		}
	}
	return false
}

// lookup returns copies of the live bindings of user.
func (l *location) lookup(user string, now time.Time) []binding {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []binding
	for _, b := range l.byUser[user] {
		if b.expires.After(now) {
			out = append(out, *b)
		}
	}
	return out
}

// byContactURI finds the binding registered with contact, if any.
func (l *location) byContactURI(contact string) (binding, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	b, ok := l.byContact[contact]
	if !ok {
		return binding{}, false
	}
	return *b, true
}

// regChange is one contact of a REGISTER.
type regChange struct {
	b      *binding
	remove bool
}

// regOutcome tells the registrar what happened.
type regOutcome int

const (
	regOK regOutcome = iota
	regOutOfOrder
	regTooMany // the user would have more than the contacts cap
)

// apply performs the changes of one REGISTER atomically (RFC 3261 section
// 10.3 steps 7-8) and returns the user's bindings afterwards. removeAll is
// the "Contact: *" form.
//
// maxContacts caps the user's bindings after the changes; a REGISTER that
// would pass it changes nothing.
//
// seq numbers the last change made (see isDurable); 0 when none.
func (l *location) apply(user, callID string, cseq uint32, removeAll bool, changes []regChange, now time.Time, maxContacts int) (out []binding, outcome regOutcome, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if removeAll {
		for _, b := range l.byUser[user] {
			if b.callID == callID && cseq <= b.cseq {
				return nil, regOutOfOrder, 0
			}
		}
		for _, b := range append([]*binding(nil), l.byUser[user]...) {
			l.removeLocked(user, b.contact)
			seq = l.markRemoved(bindingKey{user, b.contact})
		}
		return nil, regOK, seq
	}
	for _, c := range changes {
		for _, b := range l.byUser[user] {
			if b.contact == c.b.contact && b.callID == callID && cseq < b.cseq {
				return nil, regOutOfOrder, 0
			}
		}
	}
	if maxContacts > 0 {
		after := make(map[string]bool, len(l.byUser[user])+len(changes))
		for _, b := range l.byUser[user] {
			if b.expires.After(now) {
				after[b.contact] = true
			}
		}
		for _, c := range changes {
			after[c.b.contact] = !c.remove
		}
		n := 0
		for _, live := range after {
			if live {
				n++
			}
		}
		if n > maxContacts {
			return nil, regTooMany, 0
		}
	}
	for _, c := range changes {
		if c.remove {
			if l.removeLocked(user, c.b.contact) {
				seq = l.markRemoved(bindingKey{user, c.b.contact})
			}
			continue
		}
		l.putLocked(c.b)
		seq = l.markUpsert(c.b)
	}
	for _, b := range l.byUser[user] {
		if b.expires.After(now) {
			out = append(out, *b)
		}
	}
	return out, regOK, seq
}

// drop removes one binding (a contact that stopped answering).
func (l *location) drop(user, contact string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.removeLocked(user, contact) {
		l.markRemoved(bindingKey{user, contact})
		return true
	}
	return false
}

// all returns copies of every live binding.
func (l *location) all(now time.Time) []binding {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]binding, 0, l.count)
	for _, list := range l.byUser {
		for _, b := range list {
			if b.expires.After(now) {
				out = append(out, *b)
			}
		}
	}
	return out
}

// size is the number of bindings held.
func (l *location) size() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.count
}

// expire removes bindings that have expired at now.
func (l *location) expire(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for user, list := range l.byUser {
		for _, b := range append([]*binding(nil), list...) {
			if !b.expires.After(now) {
				l.removeLocked(user, b.contact)
				l.markRemoved(bindingKey{user, b.contact})
			}
		}
	}
}

func (l *location) markUpsert(b *binding) uint64 {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	l.seq++
	k := bindingKey{b.user, b.contact}
	delete(l.removes, k)
	l.upserts[k] = catalog.SIPBinding{Username: b.user, Contact: b.contact, CallID: b.callID, CSeq: b.cseq,
		ExpiresAt: b.expires, Source: b.transport + "/" + b.source, NAT: b.nat, UserAgent: b.userAgent, UpdatedAt: b.updated}
	return l.seq
}

func (l *location) markRemoved(k bindingKey) uint64 {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	l.seq++
	delete(l.upserts, k)
	l.removes[k] = struct{}{}
	return l.seq
}

// isDurable reports whether the change numbered seq is in the catalog.
func (l *location) isDurable(seq uint64) bool { return l.cat == nil || seq <= l.durable.Load() }

// flush writes pending changes to the catalog; on failure they are kept
// for the next flush.
func (l *location) flush(ctx context.Context) error {
	if l.cat == nil {
		return nil
	}
	l.fmu.Lock()
	defer l.fmu.Unlock()
	l.pmu.Lock()
	snap := l.seq
	ups, rms := l.upserts, l.removes
	l.upserts, l.removes = map[bindingKey]catalog.SIPBinding{}, map[bindingKey]struct{}{}
	l.pmu.Unlock()
	if len(ups) == 0 && len(rms) == 0 {
		l.durable.Store(snap)
		return nil
	}
	upList := make([]catalog.SIPBinding, 0, len(ups))
	for _, b := range ups {
		upList = append(upList, b)
	}
	rmList := make([]catalog.SIPBindingKey, 0, len(rms))
	for k := range rms {
		rmList = append(rmList, catalog.SIPBindingKey{Username: k.user, Contact: k.contact})
	}
	// Small transactions: the catalog has one connection, and a lookup of
	// a user not yet cached waits behind whatever holds it.
	var err error
	const chunk = 128
	for len(upList) > 0 || len(rmList) > 0 {
		u, r := upList[:min(chunk, len(upList))], rmList[:min(chunk, len(rmList))]
		upList, rmList = upList[len(u):], rmList[len(r):]
		if err = l.cat.SaveSIPBindings(ctx, u, r); err != nil {
			break
		}
	}
	if err == nil {
		l.durable.Store(snap)
	} else {
		l.pmu.Lock()
		for k, b := range ups {
			if _, newer := l.upserts[k]; !newer {
				if _, gone := l.removes[k]; !gone {
					l.upserts[k] = b
				}
			}
		}
		for k := range rms {
			if _, newer := l.upserts[k]; !newer {
				l.removes[k] = struct{}{}
			}
		}
		l.pmu.Unlock()
	}
	return err
}
