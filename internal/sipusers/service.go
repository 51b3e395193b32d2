package sipusers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/convene/convene/internal/catalog"
)

// User is an account as shown to operators: never a password or digest.
type User struct {
	Username  string    `json:"username"`
	Realm     string    `json:"realm"`
	CreatedAt time.Time `json:"created_at"`
}

// Credentials is what the registrar needs to check a digest response.
type Credentials struct {
	Username  string
	Realm     string
	HA1MD5    string
	HA1SHA256 string
}

// HA1 returns the stored digest for algorithm ("" means MD5), or "".
func (c Credentials) HA1(algorithm string) string {
	switch algorithm {
	case "", MD5, "md5":
		return c.HA1MD5
	case SHA256, "sha-256":
		return c.HA1SHA256
	}
	return ""
}

// Options configure a Service.
type Options struct {
	Catalog *catalog.Store
	// Realm is the digest realm, the SIP domain. Required.
	Realm string
	// CacheTTL bounds how long a lookup result (found or not) is reused;
	// changes made by another process (convene users) show after it.
	// 0 means 5s.
	CacheTTL time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MinPassword is the shortest password Add accepts; 0 means
	// DefaultMinPassword (12).
	MinPassword int
}

// Service manages accounts in the catalog. It is safe for concurrent use.
type Service struct {
	o Options

	mu         sync.RWMutex
	cache      map[string]cached
	refreshing map[string]bool
}

type cached struct {
	cred  Credentials
	found bool
	at    time.Time
}

const maxCache = 1 << 16

// New returns a Service.
func New(o Options) (*Service, error) {
	if o.Catalog == nil {
		return nil, errors.New("sipusers: no catalog")
	}
	if o.Realm == "" {
		return nil, errors.New("sipusers: empty realm")
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{o: o, cache: make(map[string]cached)}, nil
}

// Realm returns the digest realm of new accounts.
func (s *Service) Realm() string { return s.o.Realm }

// Add creates an account with password, storing only its HA1 digests.
func (s *Service) Add(ctx context.Context, username, password string) (User, error) {
	if err := ValidUsername(username); err != nil {
		return User{}, err
	}
	if err := ValidPassword(password, s.o.MinPassword); err != nil {
		return User{}, err
	}
	md, _ := HA1(MD5, username, s.o.Realm, password)
	sh, _ := HA1(SHA256, username, s.o.Realm, password)
	u := catalog.SIPUser{Username: username, Realm: s.o.Realm, HA1MD5: md, HA1SHA256: sh, CreatedAt: s.o.Now()}
	if err := s.o.Catalog.AddSIPUser(ctx, u); err != nil {
		if errors.Is(err, catalog.ErrExists) {
			return User{}, fmt.Errorf("%w: %q", ErrExists, username)
		}
		return User{}, fmt.Errorf("sipusers: add: %w", err)
	}
	s.forget(username)
	return User{Username: username, Realm: s.o.Realm, CreatedAt: u.CreatedAt.UTC().Truncate(time.Millisecond)}, nil
}

// List returns every account.
func (s *Service) List(ctx context.Context) ([]User, error) {
	us, err := s.o.Catalog.SIPUsers(ctx)
	if err != nil {
		return nil, fmt.Errorf("sipusers: list: %w", err)
	}
	out := make([]User, 0, len(us))
	for _, u := range us {
		out = append(out, User{Username: u.Username, Realm: u.Realm, CreatedAt: u.CreatedAt})
	}
	return out, nil
}

// Get returns one account.
func (s *Service) Get(ctx context.Context, username string) (User, error) {
	u, err := s.o.Catalog.SIPUser(ctx, username)
	if errors.Is(err, catalog.ErrNotFound) {
		return User{}, fmt.Errorf("%w: %q", ErrNotFound, username)
	}
	if err != nil {
		return User{}, fmt.Errorf("sipusers: get: %w", err)
	}
	return User{Username: u.Username, Realm: u.Realm, CreatedAt: u.CreatedAt}, nil
}

// Delete removes an account and its registrations.
func (s *Service) Delete(ctx context.Context, username string) error {
	err := s.o.Catalog.DeleteSIPUser(ctx, username)
	s.forget(username)
	if errors.Is(err, catalog.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNotFound, username)
	}
	if err != nil {
		return fmt.Errorf("sipusers: delete: %w", err)
	}
	return nil
}

// Lookup returns the credentials of username; found is false if there is
// no such account. A result is reused for CacheTTL; after that it is still
// answered at once while one background query refreshes it, so the SIP
// hot path never waits for SQL behind a catalog write (the catalog has a
// single connection). Only the first lookup of a name queries inline.
func (s *Service) Lookup(ctx context.Context, username string) (c Credentials, found bool, err error) {
	now := s.o.Now()
	s.mu.RLock()
	e, ok := s.cache[username]
	s.mu.RUnlock()
	if ok {
		if now.Sub(e.at) >= s.o.CacheTTL {
			s.refresh(username)
		}
		return e.cred, e.found, nil
	}
	if ValidUsername(username) != nil {
		return Credentials{}, false, nil
	}
	c, found, err = s.load(ctx, username, now)
	return c, found, err
}

// load queries one account and caches the answer.
func (s *Service) load(ctx context.Context, username string, now time.Time) (Credentials, bool, error) {
	var c Credentials
	found := false
	u, err := s.o.Catalog.SIPUser(ctx, username)
	switch {
	case errors.Is(err, catalog.ErrNotFound):
	case err != nil:
		return Credentials{}, false, fmt.Errorf("sipusers: lookup: %w", err)
	default:
		c, found = Credentials{Username: u.Username, Realm: u.Realm, HA1MD5: u.HA1MD5, HA1SHA256: u.HA1SHA256}, true
	}
	s.mu.Lock()
	if len(s.cache) >= maxCache {
		clear(s.cache) // crude bound; a refill costs one query per user
	}
	s.cache[username] = cached{cred: c, found: found, at: now}
	s.mu.Unlock()
	return c, found, nil
}

// Preload fills the cache with every account, so the first REGISTER of
// each does not wait for SQL.
func (s *Service) Preload(ctx context.Context) error {
	us, err := s.o.Catalog.SIPUsers(ctx)
	if err != nil {
		return fmt.Errorf("sipusers: preload: %w", err)
	}
	now := s.o.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range us {
		if len(s.cache) >= maxCache {
			break
		}
		s.cache[u.Username] = cached{cred: Credentials{Username: u.Username, Realm: u.Realm, HA1MD5: u.HA1MD5,
			HA1SHA256: u.HA1SHA256}, found: true, at: now}
	}
	return nil
}

// refresh reloads one cached account in the background, once at a time.
func (s *Service) refresh(username string) {
	s.mu.Lock()
	if s.refreshing == nil {
		s.refreshing = map[string]bool{}
	}
	if s.refreshing[username] {
		s.mu.Unlock()
		return
	}
	s.refreshing[username] = true
	s.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.load(ctx, username, s.o.Now()) //nolint:errcheck // on error the stale entry stays, retried next TTL
		s.mu.Lock()
		delete(s.refreshing, username)
		s.mu.Unlock()
	}()
}

func (s *Service) forget(username string) {
	s.mu.Lock()
	delete(s.cache, username)
	s.mu.Unlock()
}
