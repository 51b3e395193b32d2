package recorder

import (
	"log/slog"
	"time"
)

// Options configure a recording. The zero value is usable.
type Options struct {
	// Queue bounds the packets waiting for the writer goroutine, per
	// recording (default 4096: 4 s of 20 audio streams at 50 packets/s,
	// 8 s of a 5 Mb/s stream of 1,200-byte packets). Each waiting packet
	// holds a 2 KiB pooled buffer.
	Queue int
	// FlushEvery is how often buffered records are handed to the kernel
	// (write(2)): whole pages at every tick, the rest of a page at the next
	// if it is still buffered; at most 250 ms, default 200 ms. A kill -9
	// loses at most twice this much plus what waits in the queue.
	FlushEvery time.Duration
	// SyncEvery is how often the files are made durable (default 2 s; a
	// negative value never, for tests): what a power cut may lose. It is
	// done by a syncfs of their file system, one round serving every
	// recording on it: on a file system other programs write a lot to,
	// each round writes back theirs too (give recordings their own).
	SyncEvery time.Duration
	// BufferSize is each audio stream's write buffer (default 16 KiB); a
	// video stream's is videoBuffers times as large.
	BufferSize int
	// Metrics, shared by the node's recordings; NewMetrics if nil.
	Metrics *Metrics
	Logger  *slog.Logger
	// Now is the clock (time.Now if nil); it must carry a monotonic reading.
	Now func() time.Time
	// OnSlowDisk, if set, is called from the writer goroutine when packets
	// were dropped because the queue was full (at most once per flush
	// period, with the drops so far). It must not block or call Stop.
	OnSlowDisk func(dropped uint64)
	// OnError, if set, is called once from the writer goroutine when a
	// write failed and the recording stopped. It must not block or call
	// Stop (Done is closed right after it returns).
	OnError func(error)
}

const (
	defaultQueue   = 4096
	maxFlushEvery  = 250 * time.Millisecond
	defaultFlush   = 200 * time.Millisecond
	defaultSync    = 2 * time.Second
	defaultBufSize = 16 << 10
	videoBuffers   = 4
)

func (o Options) withDefaults() Options {
	if o.Queue <= 0 {
		o.Queue = defaultQueue
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = defaultFlush
	}
	o.FlushEvery = min(o.FlushEvery, maxFlushEvery)
	if o.SyncEvery == 0 {
		o.SyncEvery = defaultSync
	}
	if o.BufferSize <= 0 {
		o.BufferSize = defaultBufSize
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}
