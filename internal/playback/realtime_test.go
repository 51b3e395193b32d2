package playback

import (
	"context"
	"encoding/binary"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// TestRealClock replays 3 s of audio (every 20 ms) and video (15 frames/s,
// 3 packets a frame) on the system clock through a broker room, and
// measures when each packet reaches a receiving member: the gap between
// consecutive packets of a stream must be the recorded gap within 5 ms at
// the 99th percentile, more than the machine's own timers miss by (a
// goroutine sleeping to the audio's schedule beside it, in the same run:
// a loaded machine wakes everyone late), and the audio and video must
// keep their recorded offset within 20 ms (the median lateness of each
// kind).
func TestRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("3 s in real time")
	}
	rec := writeRecording(t, 3*time.Second, audioStream(40, 150), videoStream(55, 45, 3, 15))
	p, err := NewPlayer(rec)
	if err != nil {
		t.Fatal(err)
	}
	room := broker.NewRoom("s_t")
	type arrival struct {
		at  time.Time
		seq uint16
	}
	var mu sync.Mutex
	got := map[media.Kind][]arrival{}
	for _, k := range []media.Kind{media.Audio, media.Video} {
		if _, err := room.Join(broker.Member{ID: "rx-" + k.String(), Kind: k, Receives: true,
			Sink: broker.SinkFunc(func(pk *media.Packet, from *broker.Track) {
				now := time.Now()
				mu.Lock()
				got[from.Kind()] = append(got[from.Kind()], arrival{now, binary.BigEndian.Uint16(pk.Bytes()[2:])})
				mu.Unlock()
				pk.Release()
			})}); err != nil {
			t.Fatal(err)
		}
	}
	tracks := map[*Track]*broker.Track{}
	for i, tr := range p.Tracks {
		bt, err := room.Join(broker.Member{ID: "play-" + string(rune('a'+i)), Kind: tr.Kind, Sends: true,
			Info: broker.TrackInfo{Codec: tr.Stream.Codec, ClockRate: tr.Stream.Rate}})
		if err != nil {
			t.Fatal(err)
		}
		tracks[tr] = bt
	}
	// The recorded offsets, in the order each stream sends them.
	want := map[media.Kind][]time.Duration{}
	for i := range 150 {
		want[media.Audio] = append(want[media.Audio], ms(40+20*i))
	}
	for i := range 135 {
		want[media.Video] = append(want[media.Video], ms(55+66*(i/3)))
	}
	start := time.Now()
	ref := make(chan []float64, 1)
	go func() {
		var errs []float64 // ms
		last := start
		for i := range 150 {
			<-Real{}.After(time.Until(start.Add(ms(40 + 20*i))))
			now := time.Now()
			if i > 0 {
				errs = append(errs, math.Abs(float64(now.Sub(last)-20*time.Millisecond)/1e6))
			}
			last = now
		}
		ref <- errs
	}()
	pb := Start(context.Background(), p, Real{}, func(tr *Track, b []byte) {
		pk := media.NewPacket()
		pk.SetLen(copy(pk.Buffer(), b))
		tracks[tr].Publish(pk)
	})
	deadline := time.After(10 * time.Second)
	for {
		mu.Lock()
		n := len(got[media.Audio]) + len(got[media.Video])
		mu.Unlock()
		if n == 150+135 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("%d packets arrived", n)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if st := pb.Status(); !st.Ended || st.Sent != 285 {
		t.Errorf("state %+v", st)
	}
	pb.Stop()

	var gapErr []float64 // ms
	late := map[media.Kind][]float64{}
	for k, as := range got {
		for i, a := range as {
			late[k] = append(late[k], float64(a.at.Sub(start)-want[k][i])/1e6)
			if i > 0 {
				if a.seq != as[i-1].seq+1 {
					t.Fatalf("%s: seq %d after %d", k, a.seq, as[i-1].seq)
				}
				g := a.at.Sub(as[i-1].at) - (want[k][i] - want[k][i-1])
				gapErr = append(gapErr, math.Abs(float64(g)/1e6))
			}
		}
	}
	pct99 := func(xs []float64) float64 { sort.Float64s(xs); return xs[int(math.Ceil(0.99*float64(len(xs))))-1] }
	p99, timers := pct99(gapErr), pct99(<-ref)
	med := func(xs []float64) float64 { sort.Float64s(xs); return xs[len(xs)/2] }
	av := med(late[media.Audio]) - med(late[media.Video])
	t.Logf("inter-packet gap error: p50 %.3f ms, p99 %.3f ms, max %.3f ms over %d gaps (the machine's timers: p99 %.3f ms); A/V offset %.3f ms",
		gapErr[len(gapErr)/2], p99, gapErr[len(gapErr)-1], len(gapErr), timers, av)
	if p99 > timers+5 {
		t.Errorf("gap error p99 %.3f ms, want within 5 ms of the machine's timers' %.3f ms", p99, timers)
	}
	if math.Abs(av) > 20 {
		t.Errorf("audio and video %.3f ms off their recorded offset, want within 20 ms", av)
	}
}
