package recorder

import (
	"testing"

	"github.com/convene/convene/internal/broker"
	"github.com/convene/convene/internal/media"
)

// BenchmarkPublishRecorded: one op is one 172-byte packet published on a
// recorded track, through the tap and the queue to the writer goroutine
// and its file. allocs/op shows the path allocates nothing per packet
// (the writer's timer work is spread over many ops); drops are reported
// when the writer fell behind the publisher.
func BenchmarkPublishRecorded(b *testing.B) {
	room := broker.NewRoom("s")
	tr, _ := room.Join(broker.Member{ID: "p", Kind: media.Audio, Sends: true})
	rec, err := Start(room, b.TempDir(), Options{SyncEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	pkt := rtp(0, 1, 7, 160)
	b.ReportAllocs()
	b.SetBytes(int64(len(pkt)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := media.NewPacket()
		p.SetLen(copy(p.Buffer(), pkt))
		tr.Publish(p)
	}
	b.StopTimer()
	rec.Stop()
	st := rec.Stats()
	b.ReportMetric(float64(st.Dropped[dropQueueFull])/float64(b.N), "dropped/op")
}
