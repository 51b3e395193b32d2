package loadgen

import (
	"container/heap"
	"context"
	"time"
)

// Speaker sends one stream into one meeting.
type Speaker struct {
	Meeting int
	Stream  Stream
	SSRC    uint32
	// Phase delays the stream's start, so meetings do not tick in step.
	Phase time.Duration
	// Send transmits one packet; b is only valid during the call.
	Send func(b []byte) error

	Sent     uint64 // packets sent
	Counted  uint64 // packets sent with index >= Warmup
	Errors   uint64
	next     Item
	index    uint32
	due      time.Duration
	heapSlot int
}

type speakerHeap []*Speaker

func (h speakerHeap) Len() int           { return len(h) }
func (h speakerHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h speakerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapSlot, h[j].heapSlot = i, j
}
func (h *speakerHeap) Push(x any) { s := x.(*Speaker); s.heapSlot = len(*h); *h = append(*h, s) }
func (h *speakerHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}

// RunSpeakers sends every speaker's stream on its own schedule until
// duration has passed or ctx ends. One goroutine sends everything, so
// packets of one video frame leave back to back, as a real encoder's would.
func RunSpeakers(ctx context.Context, clock *Clock, speakers []*Speaker, duration time.Duration) {
	buf := make([]byte, 2048)
	start := clock.Now()
	h := make(speakerHeap, 0, len(speakers))
	for _, s := range speakers {
		s.next = s.Stream.Next()
		s.due = s.Phase + s.next.At
		heap.Push(&h, s)
	}
	pt := func(s *Speaker) uint8 {
		if s.Stream.Kind() == Video {
			return 96
		}
		return 0
	}
	for len(h) > 0 {
		s := h[0]
		if s.due >= duration || ctx.Err() != nil {
			return
		}
		if wait := time.Duration(start + int64(s.due) - clock.Now()); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		b := Build(buf, s.next.Size, pt(s), s.next.Marker, Packet{Seq: uint16(s.index), TS: s.next.TS, SSRC: s.SSRC,
			SendNs: clock.Now(), Meeting: uint32(s.Meeting), Index: s.index})
		if err := s.Send(b); err != nil {
			s.Errors++
		}
		s.Sent++
		if s.index >= Warmup {
			s.Counted++
		}
		s.index++
		s.next = s.Stream.Next()
		s.due = s.Phase + s.next.At
		heap.Fix(&h, 0)
	}
}
