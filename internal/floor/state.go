package floor

import (
	"sort"
	"time"
)

// Read-only views of the floors.

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
