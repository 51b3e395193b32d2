package sip

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/convene/convene/internal/catalog"
	"github.com/convene/convene/internal/sipusers"
)

const testPassword = "secret-password"

// testEnv is a Server on a free port with a fresh catalog and users.
type testEnv struct {
	srv   *Server
	cat   *catalog.Store
	users *sipusers.Service
	reg   *prometheus.Registry
	dsn   string
	opts  Options
}

func newTestEnv(t testing.TB, mod func(*Options), users ...string) *testEnv {
	t.Helper()
	dsn := filepath.Join(t.TempDir(), "convene.db")
	return startTestEnv(t, dsn, true, mod, users...)
}

func startTestEnv(t testing.TB, dsn string, addUsers bool, mod func(*Options), users ...string) *testEnv {
	t.Helper()
	ctx := context.Background()
	cat, err := catalog.Open(ctx, "sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	us, err := sipusers.New(sipusers.Options{Catalog: cat, Realm: "convene.test"})
	if err != nil {
		t.Fatal(err)
	}
	if addUsers {
		for _, u := range users {
			if _, err := us.Add(ctx, u, testPassword); err != nil {
				t.Fatal(err)
			}
		}
	}
	reg := prometheus.NewRegistry()
	o := Options{Listen: "127.0.0.1:0", Domain: "convene.test", Users: us, Catalog: cat, Registry: reg,
		Logger: testLogger(t), AuthCalls: true, Algorithms: []string{"MD5", "SHA-256"}, FlushInterval: 50 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	srv, err := New(ctx, o)
	if err != nil {
		cat.Close()
		t.Fatal(err)
	}
	e := &testEnv{srv: srv, cat: cat, users: us, reg: reg, dsn: dsn, opts: o}
	t.Cleanup(e.close)
	return e
}

func (e *testEnv) close() {
	e.srv.Close()
	e.cat.Close()
}

// freeUDPPort returns a UDP port that was free a moment ago.
func freeUDPPort(t testing.TB) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}
