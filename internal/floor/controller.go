package floor

import (
	"fmt"
	"github.com/convene/convene/internal/event"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Options configure a Controller.
type Options struct {
	// Emit reports an event (event.FloorRequest, event.FloorStyle); called with
	// the controller's mutex held, in the order of the changes.
	Emit func(typ event.Type, data any)
	// Gate reports who may send on a floor: when enforced, only the members
	// in holders. Called with the controller's mutex held.
	Gate func(floor string, enforced bool, holders map[string]bool)
	// Activity returns the packets a member has published on a floor's kind
	// so far; activity sensing watches it for silence.
	Activity func(member, floor string) uint64
	Now      func() time.Time
	// Tick is how often activity sensing looks at the holders (default 25 ms).
	Tick time.Duration
}

type memberInfo struct{ role, group string }

type sensing struct {
	holder string
	count  uint64
	since  time.Time
}

type floorState struct {
	name     string
	style    string
	auto     bool
	phase    int
	silence  time.Duration
	primary  map[string]*Token   // by group: the token of single-holder styles
	replicas map[string]*Token   // by holder
	active   map[string]*Request // by member: its waiting or granted request
	queue    []*Request          // waiting requests, FIFO
	sense    map[string]*sensing // by group, activity sensing
}

// Controller holds the floors of one session.
type Controller struct {
	o Options

	mu      sync.Mutex
	members map[string]memberInfo
	floors  map[string]*floorState
	reqs    map[string]*Request // every request still waiting or granted, by ID
	next    uint64
	closed  bool
	sensing bool
	stop    chan struct{}
	done    chan struct{}
}

// New returns a controller with the floors of Floors, all of style none.
func New(o Options) *Controller {
	if o.Emit == nil {
		o.Emit = func(event.Type, any) {}
	}
	if o.Gate == nil {
		o.Gate = func(string, bool, map[string]bool) {}
	}
	if o.Activity == nil {
		o.Activity = func(string, string) uint64 { return 0 }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Tick <= 0 {
		o.Tick = 25 * time.Millisecond
	}
	c := &Controller{o: o, members: map[string]memberInfo{}, floors: map[string]*floorState{}, reqs: map[string]*Request{}}
	for _, n := range Floors {
		c.floors[n] = &floorState{name: n, style: StyleNone, silence: DefaultSilence, primary: map[string]*Token{},
			replicas: map[string]*Token{}, active: map[string]*Request{}, sense: map[string]*sensing{}}
	}
	return c
}

// Close stops activity sensing.
func (c *Controller) Close() {
	c.mu.Lock()
	c.closed = true
	stop, done := c.stop, c.done
	c.stop = nil
	c.sensing = false
	c.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

func (c *Controller) id(prefix string) string {
	c.next++
	return prefix + strconv.FormatUint(c.next, 10)
}

func (c *Controller) floor(name string) (*floorState, error) {
	f := c.floors[name]
	if f == nil {
		return nil, fmt.Errorf("%w: no floor %q (floors are audio and video)", ErrNotFound, name)
	}
	return f, nil
}

func (c *Controller) member(id string) (memberInfo, error) {
	m, ok := c.members[id]
	if !ok {
		return m, fmt.Errorf("%w: no member %q in the session", ErrNotFound, id)
	}
	return m, nil
}

// chair reports whether by may act as chair; "" is the operator (API key).
func (c *Controller) chair(by string) error {
	if by == "" || c.members[by].role == RoleChair {
		return nil
	}
	return fmt.Errorf("%w: only a chair may do this", ErrForbidden)
}

func (f *floorState) groupOf(c *Controller, m string) string {
	if f.style == StyleDiscussion {
		return c.members[m].group
	}
	return ""
}

// holders lists the members holding a token of f, sorted.
func (f *floorState) holders() []string {
	var out []string
	for _, t := range f.primary {
		if t.Holder != "" {
			out = append(out, t.Holder)
		}
	}
	for m := range f.replicas {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func (f *floorState) position(r *Request) int {
	n := 0
	for _, q := range f.queue {
		if q.Group == r.Group {
			n++
		}
		if q == r {
			return n
		}
	}
	return 0
}

// emitReq announces a request's new status. The media path is told who may
// send first, so that a member told it is Granted is heard at once (and one
// told it is Released or Revoked is already silenced).
func (c *Controller) emitReq(f *floorState, r *Request, notify bool) {
	c.gate(f)
	v := *r
	if r.Status == Accepted {
		v.Position = f.position(r)
	}
	if notify {
		v.Holders = f.holders()
	}
	c.o.Emit(event.FloorRequest, v)
}

// gate tells the media path who may send on f now.
func (c *Controller) gate(f *floorState) {
	hs := map[string]bool{}
	for _, h := range f.holders() {
		hs[h] = true
	}
	c.o.Gate(f.name, f.style != StyleNone, hs)
}

// newReq creates a request in status st and announces it.
func (c *Controller) newReq(f *floorState, m string, st Status, replica bool) *Request {
	r := &Request{ID: c.id("r"), Floor: f.name, Member: m, Status: st, Group: f.groupOf(c, m), Replica: replica}
	if !st.Final() {
		f.active[m] = r
		c.reqs[r.ID] = r
	}
	if st.Waiting() {
		f.queue = append(f.queue, r)
	}
	c.emitReq(f, r, true)
	return r
}

// newGranted creates a request that is granted at once (one event, not
// Pending then Granted): a replica, or group g's free primary token.
func (c *Controller) newGranted(f *floorState, m string, replica bool, g string) *Request {
	r := &Request{ID: c.id("r"), Floor: f.name, Member: m, Status: Granted, Group: g, Replica: replica}
	if replica {
		f.replicas[m] = &Token{ID: c.id("t"), Holder: m, Replica: true}
	} else {
		c.primaryOf(f, g).Holder = m
		f.sense[g] = &sensing{holder: m, count: c.o.Activity(m, f.name), since: c.o.Now()}
	}
	f.active[m] = r
	c.reqs[r.ID] = r
	c.emitReq(f, r, false)
	return r
}

// give grants `to` a token: its waiting request if it has one, else a new
// granted request.
func (c *Controller) give(f *floorState, to string, replica bool, g string) *Request {
	if r := f.active[to]; r != nil && r.Status.Waiting() {
		if replica {
			c.grantReplica(f, r)
		} else {
			r.Group = g
			c.grantPrimary(f, r)
		}
		return r
	}
	return c.newGranted(f, to, replica, g)
}

// move changes a request's status along the table and announces it.
func (c *Controller) move(f *floorState, r *Request, to Status) {
	if !CanMove(r.Status, to) {
		panic(fmt.Sprintf("floor: request %s cannot move from %s to %s", r.ID, r.Status, to))
	}
	wasWaiting := r.Status.Waiting()
	r.Status = to
	if wasWaiting && !to.Waiting() {
		for i, q := range f.queue {
			if q == r {
				f.queue = append(f.queue[:i:i], f.queue[i+1:]...)
				break
			}
		}
	}
	if to.Final() {
		if f.active[r.Member] == r {
			delete(f.active, r.Member)
		}
		delete(c.reqs, r.ID)
	}
	c.emitReq(f, r, false)
}

func (c *Controller) primaryOf(f *floorState, g string) *Token {
	t := f.primary[g]
	if t == nil {
		t = &Token{ID: c.id("t"), Group: g}
		f.primary[g] = t
	}
	return t
}

// grantPrimary gives the primary token of group g (free) to r.
func (c *Controller) grantPrimary(f *floorState, r *Request) {
	t := c.primaryOf(f, r.Group)
	t.Holder = r.Member
	r.Replica = false
	f.sense[r.Group] = &sensing{holder: r.Member, count: c.o.Activity(r.Member, f.name), since: c.o.Now()}
	c.move(f, r, Granted)
}

func (c *Controller) grantReplica(f *floorState, r *Request) {
	f.replicas[r.Member] = &Token{ID: c.id("t"), Holder: r.Member, Replica: true}
	r.Replica = true
	c.move(f, r, Granted)
}

// freePrimary takes group g's token from its holder (whose request ends in
// final) and passes it on: a token is never lost.
func (c *Controller) freePrimary(f *floorState, g string, final Status) {
	t := f.primary[g]
	if t == nil || t.Holder == "" {
		return
	}
	if r := f.active[t.Holder]; r != nil && r.Status == Granted && !r.Replica {
		c.move(f, r, final)
	}
	t.Holder = ""
	delete(f.sense, g)
	c.advance(f, g)
}

// advance grants a free primary token to the first Accepted request of g.
func (c *Controller) advance(f *floorState, g string) {
	t := f.primary[g]
	if t == nil || t.Holder != "" {
		return
	}
	for _, q := range f.queue {
		if q.Group == g && q.Status == Accepted {
			c.grantPrimary(f, q)
			return
		}
	}
}

func (c *Controller) dropReplica(f *floorState, m string, final Status) {
	if _, ok := f.replicas[m]; !ok {
		return
	}
	delete(f.replicas, m)
	if r := f.active[m]; r != nil && r.Status == Granted && r.Replica {
		c.move(f, r, final)
	}
}

// Request asks for a floor for member m. A listener's request is Denied.
func (c *Controller) Request(m, floor string) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.floor(floor)
	if err != nil {
		return Request{}, err
	}
	mi, err := c.member(m)
	if err != nil {
		return Request{}, err
	}
	if mi.role == RoleListener {
		return *c.newReq(f, m, Denied, false), nil
	}
	if r := f.active[m]; r != nil {
		if r.Status == Granted {
			return Request{}, fmt.Errorf("%w: %s already holds the %s floor", ErrConflict, m, floor)
		}
		return c.view(f, r), nil
	}
	var r *Request
	switch f.style {
	case StyleNone:
		return Request{}, fmt.Errorf("%w: floor control is off for the %s floor", ErrConflict, floor)
	case StyleBrainstorming:
		r = c.newGranted(f, m, true, "")
	case StyleChalkboard:
		switch {
		case f.phase == 2:
			r = c.newGranted(f, m, true, "")
		case c.primaryOf(f, "").Holder == "" && (f.auto || mi.role == RoleChair):
			r = c.newGranted(f, m, false, "")
		default:
			r = c.newReq(f, m, Accepted, false)
		}
	default:
		g := f.groupOf(c, m)
		switch {
		case c.primaryOf(f, g).Holder == "" && (f.auto || mi.role == RoleChair):
			r = c.newGranted(f, m, false, g)
		case f.auto:
			r = c.newReq(f, m, Accepted, false)
		default:
			r = c.newReq(f, m, Pending, false)
		}
	}
	c.gate(f)
	return c.view(f, r), nil
}

func (c *Controller) view(f *floorState, r *Request) Request {
	v := *r
	if r.Status == Accepted {
		v.Position = f.position(r)
	}
	return v
}

func (c *Controller) waiting(id string) (*floorState, *Request, error) {
	r := c.reqs[id]
	if r == nil {
		return nil, nil, fmt.Errorf("%w: no waiting or granted request %q", ErrNotFound, id)
	}
	return c.floors[r.Floor], r, nil
}

// Grant grants a waiting request (by a chair): the token if it is free,
// otherwise a Pending request is Accepted into the queue.
func (c *Controller) Grant(by, reqID string) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.chair(by); err != nil {
		return Request{}, err
	}
	f, r, err := c.waiting(reqID)
	if err != nil {
		return Request{}, err
	}
	if !r.Status.Waiting() {
		return Request{}, fmt.Errorf("%w: request %s is %s", ErrConflict, r.ID, r.Status)
	}
	switch {
	case f.style == StyleBrainstorming || (f.style == StyleChalkboard && f.phase == 2):
		c.grantReplica(f, r)
	case c.primaryOf(f, r.Group).Holder == "":
		c.grantPrimary(f, r)
	case r.Status == Pending:
		c.move(f, r, Accepted)
	default:
		return Request{}, fmt.Errorf("%w: the %s floor is held by %s; it is queued at position %d",
			ErrConflict, f.name, f.primary[r.Group].Holder, f.position(r))
	}
	c.gate(f)
	return c.view(f, r), nil
}

// Deny refuses a waiting request (by a chair).
func (c *Controller) Deny(by, reqID string) (Request, error) {
	return c.end(by, reqID, Denied, true)
}

// Cancel withdraws a waiting request (by its member or a chair).
func (c *Controller) Cancel(by, reqID string) (Request, error) {
	return c.end(by, reqID, Cancelled, false)
}

func (c *Controller) end(by, reqID string, to Status, chairOnly bool) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, r, err := c.waiting(reqID)
	if err != nil {
		return Request{}, err
	}
	if chairOnly || r.Member != by {
		if err := c.chair(by); err != nil {
			return Request{}, err
		}
	}
	if !r.Status.Waiting() {
		return Request{}, fmt.Errorf("%w: request %s is %s", ErrConflict, r.ID, r.Status)
	}
	c.move(f, r, to)
	return c.view(f, r), nil
}

// Release gives back the token m holds on floor.
func (c *Controller) Release(m, floor string) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.floor(floor)
	if err != nil {
		return Request{}, err
	}
	r := f.active[m]
	if r == nil || r.Status != Granted {
		return Request{}, fmt.Errorf("%w: %s does not hold the %s floor", ErrConflict, m, floor)
	}
	if r.Replica {
		c.dropReplica(f, m, Released)
	} else {
		c.freePrimary(f, r.Group, Released)
	}
	c.gate(f)
	return c.view(f, r), nil
}

// grantee checks that `to` may be given a token.
func (c *Controller) grantee(f *floorState, to string) error {
	mi, err := c.member(to)
	if err != nil {
		return err
	}
	if mi.role == RoleListener {
		return fmt.Errorf("%w: %s is a listener and can never hold a floor", ErrConflict, to)
	}
	if r := f.active[to]; r != nil && r.Status == Granted {
		return fmt.Errorf("%w: %s already holds the %s floor", ErrConflict, to, f.name)
	}
	return nil
}

// Transfer moves the token that `by` holds on floor to member `to`.
func (c *Controller) Transfer(by, floor, to string) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.floor(floor)
	if err != nil {
		return Request{}, err
	}
	src := f.active[by]
	if src == nil || src.Status != Granted {
		return Request{}, fmt.Errorf("%w: %s does not hold the %s floor", ErrConflict, by, floor)
	}
	if !src.Replica && f.groupOf(c, to) != src.Group {
		return Request{}, fmt.Errorf("%w: %s is not in subgroup %q", ErrConflict, to, src.Group)
	}
	if err := c.grantee(f, to); err != nil {
		return Request{}, err
	}
	var r *Request
	if src.Replica {
		c.dropReplica(f, by, Released)
		r = c.give(f, to, true, "")
	} else {
		c.move(f, src, Released)
		f.primary[src.Group].Holder = ""
		r = c.give(f, to, false, src.Group)
	}
	c.gate(f)
	return c.view(f, r), nil
}

func (f *floorState) replicable() bool {
	return f.style == StyleBrainstorming || (f.style == StyleChalkboard && f.phase == 2)
}

// Replicate gives `to` a copy of a token of floor; `by` must hold one or
// be a chair. Only styles with several holders allow it.
func (c *Controller) Replicate(by, floor, to string) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.floor(floor)
	if err != nil {
		return Request{}, err
	}
	if r := f.active[by]; (r == nil || r.Status != Granted) && c.chair(by) != nil {
		return Request{}, fmt.Errorf("%w: %s holds no token of the %s floor to copy", ErrForbidden, by, floor)
	}
	if !f.replicable() {
		return Request{}, fmt.Errorf("%w: style %s (phase %d) allows one holder; replicas are for brainstorming and chalkboard phase 2", ErrConflict, f.style, f.phase)
	}
	if err := c.grantee(f, to); err != nil {
		return Request{}, err
	}
	r := c.give(f, to, true, "")
	c.gate(f)
	return c.view(f, r), nil
}

// Delete destroys a token (by its holder or a chair). A replica is gone; a
// primary token is taken from its holder and passed on, never destroyed.
func (c *Controller) Delete(by, floor, tokenID string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.floor(floor)
	if err != nil {
		return err
	}
	final := Revoked
	for m, t := range f.replicas {
		if t.ID == tokenID {
			if m == by {
				final = Released
			} else if err := c.chair(by); err != nil {
				return err
			}
			c.dropReplica(f, m, final)
			c.gate(f)
			return nil
		}
	}
	for g, t := range f.primary {
		if t.ID != tokenID {
			continue
		}
		if t.Holder == "" {
			return fmt.Errorf("%w: token %s is free; a floor's own token is never destroyed", ErrConflict, tokenID)
		}
		if t.Holder == by {
			final = Released
		} else if err := c.chair(by); err != nil {
			return err
		}
		c.freePrimary(f, g, final)
		c.gate(f)
		return nil
	}
	return fmt.Errorf("%w: no token %q on the %s floor", ErrNotFound, tokenID, floor)
}

// Distribute hands out tokens (by a chair): replicas to the members listed
// (all non-listeners when none are) under brainstorming and chalkboard
// phase 2; under discussion groups, a token to every subgroup, each granted
// to the first in its queue.
func (c *Controller) Distribute(by, floor string, to []string) ([]Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.chair(by); err != nil {
		return nil, err
	}
	f, err := c.floor(floor)
	if err != nil {
		return nil, err
	}
	var out []Request
	switch {
	case f.style == StyleDiscussion:
		for _, g := range c.groups() {
			c.primaryOf(f, g)
			c.advance(f, g)
		}
	case f.replicable():
		if len(to) == 0 {
			to = c.speakers()
		}
		for _, m := range to {
			if r := f.active[m]; r != nil && r.Status == Granted {
				continue
			}
			if err := c.grantee(f, m); err != nil {
				return out, err
			}
			out = append(out, c.view(f, c.give(f, m, true, "")))
		}
	default:
		return nil, fmt.Errorf("%w: style %s does not distribute tokens", ErrConflict, f.style)
	}
	c.gate(f)
	return out, nil
}

func (c *Controller) groups() []string {
	seen := map[string]bool{"": true}
	out := []string{""}
	for _, m := range c.members {
		if !seen[m.group] {
			seen[m.group] = true
			out = append(out, m.group)
		}
	}
	sort.Strings(out)
	return out
}

// speakers are the members that may hold a floor, sorted.
func (c *Controller) speakers() []string {
	var out []string
	for id, m := range c.members {
		if m.role != RoleListener {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// clear revokes every token of f and cancels every waiting request.
func (c *Controller) clear(f *floorState) {
	for _, q := range append([]*Request(nil), f.queue...) {
		c.move(f, q, Cancelled)
	}
	for m := range f.replicas {
		c.dropReplica(f, m, Revoked)
	}
	for g, t := range f.primary {
		if t.Holder != "" {
			if r := f.active[t.Holder]; r != nil && r.Status == Granted {
				c.move(f, r, Revoked)
			}
		}
		delete(f.primary, g)
	}
	f.sense = map[string]*sensing{}
}

// SetStyle switches a floor's style (by a chair): every token is revoked,
// every waiting request cancelled, and the new style's tokens made.
func (c *Controller) SetStyle(by, floor string, s Settings) (State, error) {
	if !ValidStyle(s.Style) {
		return State{}, fmt.Errorf("%w: style must be one of none, floor_control, brainstorming, chalkboard, discussion_groups, activity_sensing, not %q", ErrInvalid, s.Style)
	}
	silence := DefaultSilence
	if s.SilenceMS != 0 {
		silence = time.Duration(s.SilenceMS) * time.Millisecond
		if silence < MinSilence || silence > MaxSilence {
			return State{}, fmt.Errorf("%w: silence_ms must be 200..400", ErrInvalid)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.chair(by); err != nil {
		return State{}, err
	}
	f, err := c.floor(floor)
	if err != nil {
		return State{}, err
	}
	c.clear(f)
	f.style, f.auto, f.silence, f.phase = s.Style, s.Auto, silence, 0
	if f.style == StyleChalkboard {
		f.phase = 1
	}
	c.o.Emit(event.FloorStyle, styleEvent(c.state(f)))
	switch f.style {
	case StyleFloorControl, StyleActivity:
		c.primaryOf(f, "")
	case StyleChalkboard:
		c.primaryOf(f, "")
	case StyleDiscussion:
		for _, g := range c.groups() {
			c.primaryOf(f, g)
		}
	case StyleBrainstorming:
		for _, m := range c.speakers() {
			c.newGranted(f, m, true, "")
		}
	}
	st := c.state(f)
	c.gate(f)
	if f.style == StyleActivity {
		c.startSensing()
	}
	return st, nil
}

func styleEvent(st State) map[string]any {
	return map[string]any{"floor": st.Name, "style": st.Style, "auto": st.Auto, "phase": st.Phase, "silence_ms": st.SilenceMS}
}

// Advance moves a chalkboard floor to its next phase (by a chair or the
// speaker): phase 1 → 2 grants a replica to every questioner in the queue;
// phase 2 → 1 destroys every replica.
func (c *Controller) Advance(by, floor string) (State, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.floor(floor)
	if err != nil {
		return State{}, err
	}
	if f.style != StyleChalkboard {
		return State{}, fmt.Errorf("%w: the %s floor is %s, not chalkboard", ErrConflict, floor, f.style)
	}
	if t := f.primary[""]; t == nil || t.Holder != by || by == "" {
		if err := c.chair(by); err != nil {
			return State{}, err
		}
	}
	if f.phase == 1 {
		f.phase = 2
		for _, q := range append([]*Request(nil), f.queue...) {
			c.grantReplica(f, q)
		}
	} else {
		f.phase = 1
		for m := range f.replicas {
			c.dropReplica(f, m, Revoked)
		}
	}
	st := c.state(f)
	c.o.Emit(event.FloorStyle, styleEvent(st))
	c.gate(f)
	return st, nil
}

// AddMember makes id a member with a role, in subgroup group ("" = main).
func (c *Controller) AddMember(id, role, group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.members[id] = memberInfo{role: role, group: group}
	for _, n := range Floors {
		f := c.floors[n]
		if f.style == StyleBrainstorming && role != RoleListener && f.active[id] == nil {
			c.newGranted(f, id, true, "")
		}
		if f.style == StyleDiscussion {
			c.primaryOf(f, group)
		}
		c.gate(f)
	}
}

// SetGroup moves a member to another subgroup. Under discussion groups it
// gives up the token and requests of its old group.
func (c *Controller) SetGroup(id, group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mi, ok := c.members[id]
	if !ok || mi.group == group {
		return
	}
	for _, n := range Floors {
		if f := c.floors[n]; f.style == StyleDiscussion {
			c.leaveFloor(f, id, Revoked)
		}
	}
	mi.group = group
	c.members[id] = mi
	for _, n := range Floors {
		f := c.floors[n]
		if f.style == StyleDiscussion {
			c.primaryOf(f, group)
		}
		c.gate(f)
	}
}

func (c *Controller) leaveFloor(f *floorState, id string, final Status) {
	r := f.active[id]
	switch {
	case r == nil:
	case r.Status.Waiting():
		c.move(f, r, Cancelled)
	case r.Replica:
		c.dropReplica(f, id, final)
	default:
		c.freePrimary(f, r.Group, final)
	}
}

// RemoveMember takes a leaving member's tokens and requests away; a token
// it held passes to the next in the queue.
func (c *Controller) RemoveMember(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.members[id]; !ok {
		return
	}
	for _, n := range Floors {
		c.leaveFloor(c.floors[n], id, Released)
	}
	delete(c.members, id)
	for _, n := range Floors {
		c.gate(c.floors[n])
	}
}

// Holds reports whether member m may send on floor now.
func (c *Controller) Holds(m, floor string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.floors[floor]
	if f == nil {
		return false
	}
	if f.style == StyleNone {
		return true
	}
	_, rep := f.replicas[m]
	if rep {
		return true
	}
	for _, t := range f.primary {
		if t.Holder == m {
			return true
		}
	}
	return false
}

// States returns every floor.
func (c *Controller) States() []State {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]State, 0, len(Floors))
	for _, n := range Floors {
		out = append(out, c.state(c.floors[n]))
	}
	return out
}

// State returns one floor.
func (c *Controller) State(floor string) (State, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.floor(floor)
	if err != nil {
		return State{}, err
	}
	return c.state(f), nil
}

// GetRequest returns a waiting or granted request.
func (c *Controller) GetRequest(id string) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, r, err := c.waiting(id)
	if err != nil {
		return Request{}, err
	}
	return c.view(f, r), nil
}

func (c *Controller) state(f *floorState) State {
	st := State{Name: f.name, Style: f.style, Auto: f.auto, Phase: f.phase, Tokens: []Token{}, Queue: []Request{}}
	if f.style == StyleActivity {
		st.SilenceMS = int(f.silence / time.Millisecond)
	}
	for _, t := range f.primary {
		st.Tokens = append(st.Tokens, *t)
	}
	for _, t := range f.replicas {
		st.Tokens = append(st.Tokens, *t)
	}
	sort.Slice(st.Tokens, func(i, j int) bool { return st.Tokens[i].ID < st.Tokens[j].ID })
	for _, q := range f.queue {
		st.Queue = append(st.Queue, c.view(f, q))
	}
	return st
}
