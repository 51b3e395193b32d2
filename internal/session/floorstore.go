package session

import (
	"context"
	"encoding/json"
	"github.com/convene/convene/internal/event"
	"log/slog"
	"time"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/floor"
)

// floorSaver keeps a session's floor state (style, tokens and their
// holders, the queue) in the catalog, so a floor-controlled session comes
// back controlled after a restart (Restore → floor.Controller.Restore).
//
// Every floor event kicks it; one goroutine per session writes the latest
// floor.Controller.States, so a burst of changes is one write, and the
// request→grant path never waits for the catalog. What a crash can lose is
// the changes of the last write's duration (about a millisecond with WAL);
// a drain or finish writes the final state before it returns.
type floorSaver struct {
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newFloorSaver() *floorSaver {
	return &floorSaver{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// changed is called from the floor controller's Emit, under its lock: it
// must not block.
func (f *floorSaver) changed(typ event.Type) {
	if typ != event.FloorRequest && typ != event.FloorStyle {
		return
	}
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// run writes the floors of session id until close; the last write is after
// close was called.
func (f *floorSaver) run(cat *catalog.Store, id string, floors *floor.Controller, log *slog.Logger) {
	defer close(f.done)
	save := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, st := range floors.States() {
			b, err := json.Marshal(st)
			if err == nil {
				err = cat.SaveFloorState(ctx, id, st.Name, b)
			}
			if err != nil {
				log.Error("save floor state", "session", id, "floor", st.Name, "err", err)
			}
		}
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
