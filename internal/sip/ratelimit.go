package sip

import (
	"hash/maphash"
	"sync"
	"time"
)

// limiter is a per-key token bucket: rate tokens per second, burst of
// twice the rate. A zero rate allows everything.
type limiter struct {
	rate, burst float64
	seed        maphash.Seed
	shards      [16]limiterShard
}

type limiterShard struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate float64) *limiter {
	l := &limiter{rate: rate, burst: 2 * rate, seed: maphash.MakeSeed()}
	if l.burst < 1 {
		l.burst = 1
	}
	for i := range l.shards {
		l.shards[i].buckets = make(map[string]*bucket)
	}
	return l
}

// allow takes a token for key at now.
func (l *limiter) allow(key string, now time.Time) bool {
	if l.rate <= 0 {
		return true
	}
	sh := &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.buckets[key]
	if b == nil {
		b = &bucket{tokens: l.burst, last: now}
		sh.buckets[key] = b
	}
	if d := now.Sub(b.last).Seconds(); d > 0 {
		b.tokens = min(l.burst, b.tokens+d*l.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// prune forgets buckets that have been full for a while.
func (l *limiter) prune(now time.Time) {
	if l.rate <= 0 {
		return
	}
	full := time.Duration(l.burst / l.rate * float64(time.Second))
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for k, b := range sh.buckets {
			if now.Sub(b.last) > full {
				delete(sh.buckets, k)
			}
		}
		sh.mu.Unlock()
	}
}
