package floor

import (
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/convene/convene/internal/event"
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
