package session

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/floor"
)

// floorSaver keeps a session's floor state (style, tokens and their
// holders, the queue) in the catalog, so a floor-controlled session comes
// back controlled after a restart (Restore → floor.Controller.Restore).
//
// Every floor event kicks it; one goroutine per session writes the latest
// floor.Controller.States, so a burst of changes is one write, and the
// floor events (request→grant over the event stream) never wait for the
// catalog. The API's answer to a primitive or a style change does: it is
// sent after wait, once a write that began after the change has committed,
// so nothing acknowledged is lost to a crash. A drain or finish writes the
// final state before it returns.
type floorSaver struct {
	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	asked   uint64 // changes made
	saved   uint64 // changes up to this one are in the catalog
	failed  error  // the last write's error, until one succeeds
	waiters []floorWaiter
}

type floorWaiter struct {
	upTo uint64
	ch   chan error
}

// errFloorSaverStopped answers a wait after the session's floors stopped.
var errFloorSaverStopped = errors.New("session: floor state is no longer saved (session over)")

func newFloorSaver() *floorSaver {
	return &floorSaver{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// wait returns once every change made before the call is in the catalog,
// or with the write's error.
func (f *floorSaver) wait(ctx context.Context) error {
	f.mu.Lock()
	if f.saved >= f.asked {
		f.mu.Unlock()
		return nil
	}
	w := floorWaiter{upTo: f.asked, ch: make(chan error, 1)}
	f.waiters = append(f.waiters, w)
	f.mu.Unlock()
	select {
	case err := <-w.ch:
		return err
	case <-f.done:
		return errFloorSaverStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wrote records the outcome of a write of every change up to upTo.
func (f *floorSaver) wrote(upTo uint64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		f.saved = max(f.saved, upTo)
	}
	keep := f.waiters[:0]
	for _, w := range f.waiters {
		switch {
		case err == nil && w.upTo <= f.saved:
			w.ch <- nil
		case err != nil && w.upTo <= upTo:
			w.ch <- err
		default:
			keep = append(keep, w)
		}
	}
	f.waiters = keep
}

// changed is called from the floor controller's Emit, under its lock: it
// must not block.
func (f *floorSaver) changed(typ event.Type) {
	if typ != event.FloorRequest && typ != event.FloorStyle {
		return
	}
	f.mu.Lock()
	f.asked++
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// run writes the floors of session id until close; the last write is after
// close was called.
func (f *floorSaver) run(write func(ctx context.Context, floor string, state []byte) error, id string, floors *floor.Controller, log *slog.Logger) {
	defer close(f.done)
	save := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.mu.Lock()
		upTo := f.asked // States below is read after this: it holds these changes
		f.mu.Unlock()
		var failed error
		for _, st := range floors.States() {
			b, err := json.Marshal(st)
			if err == nil {
				err = write(ctx, st.Name, b)
			}
			if err != nil {
				log.Error("save floor state", "session", id, "floor", st.Name, "err", err)
				failed = err
			}
		}
		f.wrote(upTo, failed)
	}
	for {
		select {
		case <-f.kick:
			save()
		case <-f.stop:
			select {
			case <-f.kick:
				save()
			default:
			}
			return
		}
	}
}

func (f *floorSaver) close() {
	close(f.stop)
	<-f.done
}

// restoreFloors puts back the floor states stored for session id; members
// are in c already. mu is held.
func (s *Service) restoreFloors(id string, c *control, saved map[string][]byte) {
	var states []floor.State
	for name, b := range saved {
		var st floor.State
		if err := json.Unmarshal(b, &st); err != nil || st.Name != name {
			s.log.Error("stored floor state unreadable; the floor starts as none", "session", id, "floor", name, "err", err)
			continue
		}
		states = append(states, st)
	}
	c.floors.Restore(states)
}
