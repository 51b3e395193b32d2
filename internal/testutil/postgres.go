package testutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is a throwaway PostgreSQL server: a cluster made by initdb in a
// temporary directory, listening only on a unix socket in that directory
// (no TCP port), with password (SCRAM) authentication for its one role,
// "convene". Durability is off (fsync, synchronous_commit): it is for tests.
//
// Tests run as root, and PostgreSQL refuses to: under root the server runs
// as Debian's "postgres" system user (made by the postgresql package that
// scripts/install-deps.sh test installs), else as "nobody", and its
// directory (mode 0700) belongs to that user. Root, the test, still reaches
// the socket; other users on the machine do not.
type Postgres struct {
	dir      string // the temporary directory; data in dir/data, socket in dir
	password string
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has been waited for
	waitErr  error
	dbs      atomic.Int64
}

// PostgresBinDir returns the directory of the newest PostgreSQL server
// binaries installed (Debian keeps initdb and postgres off PATH, in
// /usr/lib/postgresql/<major>/bin), or CONVENE_PG_BIN when set.
func PostgresBinDir() (string, error) {
	if d := os.Getenv("CONVENE_PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	for _, name := range []string{"initdb", "postgres"} {
		if _, err := exec.LookPath(name); err != nil {
			return "", fmt.Errorf("no PostgreSQL server binaries (initdb, postgres) in /usr/lib/postgresql/*/bin or on PATH")
		}
	}
	p, _ := exec.LookPath("initdb")
	return filepath.Dir(p), nil
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// NeedPostgres starts a throwaway PostgreSQL server for t and stops it (by
// its PID) when t ends. Without the server binaries the test is skipped,
// except under CI=true, where it fails, like NeedBinary.
func NeedPostgres(t testing.TB) *Postgres {
	t.Helper()
	NeedPostgresBinaries(t)
	p, err := StartPostgres()
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	return p
}

// NeedPostgresBinaries skips t (fails it under CI=true) when the
// PostgreSQL server binaries are not installed.
func NeedPostgresBinaries(t testing.TB) {
	t.Helper()
	if _, err := PostgresBinDir(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v, and under CI they must be (scripts/install-deps.sh test installs postgresql)", err)
		}
		t.Skipf("%v (scripts/install-deps.sh test installs postgresql); under CI=true this fails", err)
	}
}

// StartPostgres runs initdb and starts the server, returning once it
// accepts connections. The caller must Stop it; NeedPostgres does that for
// a test, and a package sharing one server among its tests calls Stop from
// TestMain.
func StartPostgres() (_ *Postgres, err error) {
	bin, err := PostgresBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "convene-pg-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	cred, err := postgresCredential(dir)
	if err != nil {
		return nil, err
	}
	pw := make([]byte, 16)
	rand.Read(pw)
	p := &Postgres{dir: dir, password: hex.EncodeToString(pw), exited: make(chan struct{})}

	pwfile := filepath.Join(dir, "pwfile")
	if err := writeOwned(pwfile, p.password+"\n", cred); err != nil {
		return nil, err
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"),
		"-U", "convene", "--pwfile", pwfile, "--auth", "scram-sha-256",
		"-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := initdb.CombinedOutput()
	os.Remove(pwfile)
	if err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}

	logf, err := os.Create(filepath.Join(dir, "postgres.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", filepath.Join(dir, "data"),
		"-k", dir, "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "shared_buffers=16MB", "-c", "max_connections=100")
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	// SIGQUIT (immediate shutdown) when the test binary dies without
	// stopping it, say on a test timeout.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		c, cerr := pgx.Connect(ctx, p.DSN("postgres"))
		if cerr == nil {
			c.Close(ctx)
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("postgres exited (%v): %s", p.waitErr, p.logTail())
		case <-ctx.Done():
			p.Stop()
			return nil, fmt.Errorf("postgres not accepting connections after a minute (%v): %s", cerr, p.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// postgresCredential picks the user the server runs as and gives it dir.
// Nil (the current user) unless the test runs as root.
func postgresCredential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("tests run as root and PostgreSQL refuses root, but neither the postgres nor the nobody user exists: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

func writeOwned(path, body string, cred *syscall.Credential) error {
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return err
	}
	if cred != nil {
		return os.Chown(path, int(cred.Uid), int(cred.Gid))
	}
	return nil
}

func (p *Postgres) logTail() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "postgres.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// DSN is the URL of database db on the server, password included, as a
// node's catalog.dsn would be written: postgres://convene:…@/db?host=<dir>.
func (p *Postgres) DSN(db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword("convene", p.password), Path: "/" + db,
		RawQuery: url.Values{"host": {p.dir}, "sslmode": {"disable"}}.Encode()}
	return u.String()
}

// Password is the role's password, for tests that check it is never shown.
func (p *Postgres) Password() string { return p.password }

// CreateDatabase makes a new, empty database named after prefix (letters
// and digits kept, lower-cased, plus a sequence number) and returns its DSN.
func (p *Postgres) CreateDatabase(prefix string) (string, error) {
	var b strings.Builder
	for _, r := range strings.ToLower(prefix) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 40 {
		name = name[:40]
	}
	name = fmt.Sprintf("t_%s_%d", name, p.dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, p.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return p.DSN(name), nil
}

// Stop stops the server by its PID — SIGINT, PostgreSQL's fast shutdown,
// then SIGKILL if it is still there after 30 s — and removes its directory.
// It is safe to call more than once.
func (p *Postgres) Stop() error {
	var err error
	if p.cmd != nil && p.cmd.Process != nil {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-p.exited:
			case <-time.After(30 * time.Second):
				p.cmd.Process.Kill()
				<-p.exited
				err = errors.New("postgres did not stop on SIGINT within 30 s; killed")
			}
		}
	}
	if rerr := os.RemoveAll(p.dir); rerr != nil && err == nil {
		err = rerr
	}
	return err
}
