// Package pgtest starts a throwaway PostgreSQL cluster for tests: initdb into
// a temporary directory, then the postgres server on a Unix socket in that
// directory (and 127.0.0.1 on a free port), with durability switched off for
// speed. One cluster serves a whole test binary; each test gets its own
// schema (or database) so tests run in parallel.
//
// Usage, once per test package:
//
//	var pg pgtest.Shared
//
//	func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }
//
//	func TestX(t *testing.T) {
//		dsn := pg.Cluster(t).NewSchema(t) // search_path set to a fresh schema
//		…
//	}
//
// The cluster starts on first use (a package whose PostgreSQL tests are
// filtered out pays nothing) and Main stops it after the tests. The server
// process is tied to the test process (parent-death signal), so a test
// binary killed by -timeout does not leave it running.
//
// A whole test run can share one cluster: when $MAESTRO_PGTEST_CLUSTER
// (ClusterEnv) names a running one (scripts/test.sh starts one with the
// pgtestd command and sets it for every test binary), Cluster attaches to
// it instead of running initdb and a server of its own, and Main leaves it
// running for its owner to stop. Schema and database names carry a random
// prefix per test binary, so binaries sharing a cluster never collide.
//
// When the PostgreSQL server binaries are not installed, Cluster skips the
// test with a loud reason, except under CI=true, where it fails: CI must
// run every tier (scripts/install-deps.sh installs them). Binaries are
// looked up in $MAESTRO_PGTEST_BIN if set, else PATH, then
// /usr/lib/postgresql/*/bin (newest first). Run as
// root, the server runs as the "postgres" user (initdb refuses root).
package pgtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/maestro-run/maestro/internal/proctest"
)

// ErrNotInstalled reports missing PostgreSQL server binaries.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb, postgres) not found")

// ClusterEnv names the environment variable holding the admin DSN of a
// running cluster (as pgtestd prints it) that Shared attaches to instead of
// starting one.
const ClusterEnv = "MAESTRO_PGTEST_CLUSTER"

// maxConnections is the server's connection limit of a cluster started by
// Start (one test binary's tests).
const maxConnections = 400

// Timeouts bounding every step.
const (
	initdbTimeout = 60 * time.Second
	startTimeout  = 30 * time.Second
	stopTimeout   = 15 * time.Second
)

// Shared is a cluster started on first use and stopped by Main. The zero
// value is ready to use; keep one per test binary (a package-level var in
// a _test.go file).
type Shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Main runs the package's tests and then stops the cluster if one was
// started. Call it from TestMain: os.Exit(pg.Main(m)).
func (s *Shared) Main(m *testing.M) int {
	code := m.Run()
	if s.c != nil {
		if err := s.c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop cluster: %v\n", err)
		}
	}
	return code
}

// Cluster returns the running cluster, starting it on the first call. If
// the binaries are missing it skips tb (fails it when CI=true); if the
// cluster cannot start it fails tb.
func (s *Shared) Cluster(tb testing.TB) *Cluster {
	tb.Helper()
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), initdbTimeout+startTimeout)
		defer cancel()
		if dsn := os.Getenv(ClusterEnv); dsn != "" {
			s.c, s.err = Attach(ctx, dsn)
			return
		}
		s.c, s.err = Start(ctx)
	})
	if errors.Is(s.err, ErrNotInstalled) {
		SkipOrFail(tb, s.err)
	}
	if s.err != nil {
		tb.Fatalf("pgtest: start a throwaway PostgreSQL cluster: %v", s.err)
	}
	return s.c
}

// SkipOrFail skips tb because a PostgreSQL prerequisite is missing, or
// fails it when CI=true.
func SkipOrFail(tb testing.TB, reason error) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("PostgreSQL tests cannot run and CI=true requires them: %v. Run scripts/install-deps.sh (installs postgresql).", reason)
	}
	tb.Skipf("SKIPPING POSTGRESQL TESTS: %v. Install the server (scripts/install-deps.sh, or apt-get install postgresql) to run them.", reason)
}

// Cluster is a running throwaway PostgreSQL server.
type Cluster struct {
	dir     string // temporary root: data/, sock/, postgres.log
	sockDir string
	port    int
	bin     string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	admin   *sql.DB
	prefix  string // random, starts every schema and database name (unique across test binaries)
	seq     atomic.Int64
	// attached: the server belongs to another process (ClusterEnv); Stop
	// only disconnects.
	attached bool
	stop     sync.Once
	stopErr  error
}

// Start creates and starts a cluster. Stop it with Stop.
func Start(ctx context.Context) (*Cluster, error) {
	return StartWith(ctx, maxConnections)
}

// StartWith is Start with the server's connection limit: a cluster shared
// by several test binaries at once (pgtestd) needs more than one binary's.
func StartWith(ctx context.Context, maxConns int) (*Cluster, error) {
	prefix, err := namePrefix()
	if err != nil {
		return nil, err
	}
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(tempBase(cred), "maestro-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("create cluster directory: %w", err)
	}
	c := &Cluster{dir: dir, sockDir: filepath.Join(dir, "sock"), bin: bin, prefix: prefix, exited: make(chan struct{})}
	if err := c.start(ctx, cred, maxConns); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Attach connects to the running cluster whose admin DSN is dsn (a
// Cluster's DSN("postgres", nil), as pgtestd prints it). Stop disconnects
// and leaves the server running.
func Attach(ctx context.Context, dsn string) (*Cluster, error) {
	prefix, err := namePrefix()
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("attach to the cluster in $%s: parse %q: %w", ClusterEnv, dsn, err)
	}
	port, err := strconv.Atoi(u.Query().Get("port"))
	if err != nil || u.Query().Get("host") == "" {
		return nil, fmt.Errorf("attach to the cluster in $%s: %q names no socket directory and port (host=, port=)", ClusterEnv, dsn)
	}
	c := &Cluster{sockDir: u.Query().Get("host"), port: port, prefix: prefix, attached: true}
	if err := c.connect(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("attach to the cluster in $%s (%s): %w", ClusterEnv, dsn, err)
	}
	return c, nil
}

// namePrefix returns a random prefix for a cluster's schema and database
// names, so that test binaries sharing a server never pick the same name.
func namePrefix() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("pick a name prefix: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func (c *Cluster) start(ctx context.Context, cred *syscall.Credential, maxConns int) error {
	data := filepath.Join(c.dir, "data")
	for _, d := range []string{c.dir, c.sockDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if cred != nil {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return fmt.Errorf("hand %s to the postgres user: %w", d, err)
			}
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "LANG=C", "TZ=UTC"}

	ictx, cancel := context.WithTimeout(ctx, initdbTimeout)
	defer cancel()
	initdb := exec.CommandContext(ictx, filepath.Join(c.bin, "initdb"), "-D", data, "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Env = env
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}

	port, err := proctest.FreePort()
	if err != nil {
		return err
	}
	c.port = port
	logf, err := os.Create(filepath.Join(c.dir, "postgres.log"))
	if err != nil {
		return err
	}
	c.cmd = exec.Command(filepath.Join(c.bin, "postgres"), "-D", data, "-k", c.sockDir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections="+strconv.Itoa(maxConns), "-c", "shared_buffers=64MB",
		"-c", "unix_socket_permissions=0777", "-c", "log_line_prefix=%m [%p] ")
	c.cmd.Env = env
	// Own process group (a terminal's Ctrl-C goes to the test binary, which
	// stops the server), killed with the test process if it dies first.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return err
	}
	c.cmd.Stdout = logf
	if err := c.cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start postgres: %w", err)
	}
	// The server announces readiness on stderr; copy every line to the log
	// and signal the announcement.
	ready := make(chan struct{})
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(stderr)
		announced := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if !announced && strings.Contains(line, "database system is ready to accept connections") {
				announced = true
				close(ready)
			}
		}
		_, _ = io.Copy(logf, stderr)
	}()
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-ready:
	case <-c.exited:
		return fmt.Errorf("postgres exited during start-up (%v):\n%s", c.waitErr, c.logTail())
	case <-timer.C:
		return fmt.Errorf("postgres not ready after %s:\n%s", startTimeout, c.logTail())
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := c.connect(ctx); err != nil {
		return fmt.Errorf("connect to the new cluster: %w\n%s", err, c.logTail())
	}
	return nil
}

// connect opens the admin pool (on the postgres database) and checks that
// the server answers.
func (c *Cluster) connect(ctx context.Context) error {
	var err error
	if c.admin, err = openDB(c.DSN("postgres", nil)); err != nil {
		return err
	}
	c.admin.SetMaxOpenConns(4)
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.admin.PingContext(pctx)
}

// BinEnv names the environment variable that, when set, is the only
// directory searched for the server binaries (a custom installation; or a
// directory without them, to see how tests behave on a machine lacking
// PostgreSQL).
const BinEnv = "MAESTRO_PGTEST_BIN"

// FindBinaries returns the directory holding initdb and postgres: $BinEnv
// if set, else from PATH, else the newest /usr/lib/postgresql/*/bin.
func FindBinaries() (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		if isExec(filepath.Join(dir, "initdb")) && isExec(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
		return "", fmt.Errorf("%w (looked in %s=%s)", ErrNotInstalled, BinEnv, dir)
	}
	var tried []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dir := filepath.Dir(real)
			if isExec(filepath.Join(dir, "postgres")) {
				return dir, nil
			}
			tried = append(tried, dir)
		}
	} else {
		tried = append(tried, "PATH")
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, dir := range dirs {
		if isExec(filepath.Join(dir, "initdb")) && isExec(filepath.Join(dir, "postgres")) {
			return dir, nil
		}
	}
	tried = append(tried, "/usr/lib/postgresql/*/bin")
	return "", fmt.Errorf("%w (looked in %s)", ErrNotInstalled, strings.Join(tried, ", "))
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// credential returns the postgres user's credential when running as root
// (nil otherwise: the server runs as the current user).
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: running as root needs a \"postgres\" user to run the server as (initdb refuses root): %v", ErrNotInstalled, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("postgres user has a non-numeric uid/gid %s/%s", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// tempBase picks a parent directory the server's user can reach.
func tempBase(cred *syscall.Credential) string {
	base := os.TempDir()
	if cred == nil {
		return base
	}
	// Every ancestor must be searchable by others (a TMPDIR under /root is
	// not); fall back to /tmp.
	for d := base; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return base
		}
	}
}

func (c *Cluster) logTail() string {
	b, err := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// DSN returns a connection URL for database db over the Unix socket, with
// extra connection parameters (e.g. search_path).
func (c *Cluster) DSN(db string, params map[string]string) string {
	q := url.Values{}
	q.Set("host", c.sockDir)
	q.Set("port", strconv.Itoa(c.port))
	q.Set("sslmode", "disable")
	for k, v := range params {
		q.Set(k, v)
	}
	return (&url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + db, RawQuery: q.Encode()}).String()
}

// TCPAddr returns the server's 127.0.0.1 address.
func (c *Cluster) TCPAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)) }

// NewSchema creates a fresh schema and returns a DSN whose search_path is
// that schema, so everything a test creates is isolated from parallel tests.
func (c *Cluster) NewSchema(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("t%s_%d", c.prefix, c.seq.Add(1))
	if _, err := c.admin.ExecContext(tb.Context(), "CREATE SCHEMA "+name); err != nil {
		tb.Fatalf("pgtest: create schema %s: %v", name, err)
	}
	return c.DSN("postgres", map[string]string{"search_path": name})
}

// NewDatabase creates a fresh database and returns its DSN, for code that
// needs a whole database (its own schemas, extensions).
func (c *Cluster) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("db%s_%d", c.prefix, c.seq.Add(1))
	if _, err := c.admin.ExecContext(tb.Context(), "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	return c.DSN(name, nil)
}

// OpenDB opens a database/sql pool on dsn through pgx, closed when tb
// ends.
func OpenDB(tb testing.TB, dsn string) *sql.DB {
	tb.Helper()
	db, err := openDB(dsn)
	if err != nil {
		tb.Fatalf("pgtest: open %s: %v", dsn, err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func openDB(dsn string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse the DSN: %w", err)
	}
	return stdlib.OpenDB(*cfg), nil
}

// Stop shuts the server down (immediately: nothing is worth keeping) and
// removes its directory; of an attached cluster, it only disconnects.
func (c *Cluster) Stop() error {
	c.stop.Do(func() {
		if c.admin != nil {
			c.admin.Close()
		}
		if c.attached {
			return
		}
		if c.cmd != nil && c.cmd.Process != nil {
			_ = c.cmd.Process.Signal(syscall.SIGQUIT)
			timer := time.NewTimer(stopTimeout)
			select {
			case <-c.exited:
			case <-timer.C:
				_ = c.cmd.Process.Kill()
				<-c.exited
			}
			timer.Stop()
		}
		c.stopErr = os.RemoveAll(c.dir)
	})
	return c.stopErr
}
