package api

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/convene/convene/internal/session"
)

// revocationTTL is how long a token's revocation verdict is kept: a
// revoked view link stops playing within about this long (plus the
// player's next playlist fetch).
const revocationTTL = 2 * time.Second

// revocationsMax bounds the cache; past it, verdicts older than
// revocationTTL are dropped.
const revocationsMax = 10000

// revocations caches, per session and token id, whether a join or view
// token is still good (CheckJoinToken's answer), so that serving an HLS
// playlist or segment under a token's signed prefix costs a map lookup,
// not a catalog query. One request refreshes a stale verdict; those that
// come meanwhile wait for it.
type revocations struct {
	check func(ctx context.Context, sid, id string) error
	now   func() time.Time

	mu sync.Mutex
	m  map[string]*verdict
}

type verdict struct {
	at    time.Time
	done  chan struct{} // closed once err is set
	err   error
	final bool // revoked or unknown: the token never comes back
}

func newRevocations(check func(ctx context.Context, sid, id string) error) *revocations {
	return &revocations{check: check, now: time.Now, m: make(map[string]*verdict)}
}

// refused returns nil while token id of session sid is good, the reason
// otherwise (a context or catalog error too: the caller refuses then).
func (c *revocations) refused(ctx context.Context, sid, id string) error {
	k := sid + "/" + id
	now := c.now()
	c.mu.Lock()
	v := c.m[k]
	if v != nil && (v.final || now.Sub(v.at) < revocationTTL) {
		c.mu.Unlock()
		select {
		case <-v.done:
			return v.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if len(c.m) >= revocationsMax {
		for key, old := range c.m {
			if now.Sub(old.at) >= revocationTTL {
				delete(c.m, key)
			}
		}
	}
	v = &verdict{at: now, done: make(chan struct{})}
	c.m[k] = v
	c.mu.Unlock()
	// The check runs on its own context, so that one viewer hanging up
	// does not fail the others waiting for the same verdict.
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := c.check(cctx, sid, id)
	cancel()
	c.mu.Lock()
	v.err = err
	v.final = err != nil && isForbidden(err)
	if err != nil && !v.final {
		// A catalog error is not kept: the next request asks again.
		delete(c.m, k)
	}
	close(v.done)
	c.mu.Unlock()
	return err
}

func isForbidden(err error) bool { return errors.Is(err, session.ErrForbidden) }
