package pgtest_test

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/pgtest"
)

var pg pgtest.Shared

func TestMain(m *testing.M) { os.Exit(pg.Main(m)) }

// TestStartStop runs alone (not parallel) so its start-up time is not
// inflated by another cluster starting beside it.
func TestStartStop(t *testing.T) {
	if _, err := pgtest.FindBinaries(); err != nil {
		pgtest.SkipOrFail(t, err)
	}
	start := time.Now()
	c, err := pgtest.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// About 1 s on an idle 2-core machine, most of it initdb's CPU. No wall
	// bound here: Start bounds each step itself (initdb, readiness) and
	// fails with the server's log, so a hang fails there; a bound of its
	// own measured initdb under the whole suite's load (12.6 s in CI).
	t.Logf("cluster started in %s", time.Since(start))
	db := pgtest.OpenDB(t, c.DSN("postgres", nil))
	var v string
	if err := db.QueryRowContext(t.Context(), "SHOW server_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	t.Logf("server version %s", v)
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := db.PingContext(t.Context()); err == nil {
		t.Fatal("the server still answers after Stop")
	}
}

func TestSchemasAreIsolated(t *testing.T) {
	t.Parallel()
	c := pg.Cluster(t)
	a, b := pgtest.OpenDB(t, c.NewSchema(t)), pgtest.OpenDB(t, c.NewSchema(t))
	for _, db := range []*sql.DB{a, b} {
		if _, err := db.ExecContext(t.Context(), "CREATE TABLE items (n int)"); err != nil {
			t.Fatalf("the same table name in two schemas: %v", err)
		}
	}
	if _, err := a.ExecContext(t.Context(), "INSERT INTO items VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRowContext(t.Context(), "SELECT count(*) FROM items").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("schema b sees %d rows inserted in schema a", n)
	}
}

func TestNewDatabase(t *testing.T) {
	t.Parallel()
	c := pg.Cluster(t)
	db := pgtest.OpenDB(t, c.NewDatabase(t))
	var name string
	if err := db.QueryRowContext(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name == "postgres" {
		t.Fatalf("NewDatabase connected to %q, want a fresh database", name)
	}
}

// TestMissingBinaries runs this test binary again on a pretend machine
// without PostgreSQL: a test needing a cluster is skipped loudly, but fails
// when CI=true.
func TestMissingBinaries(t *testing.T) {
	t.Parallel()
	if os.Getenv(pgtest.BinEnv) != "" {
		t.Skip("already inside the pretend machine")
	}
	tests := []struct {
		ci       bool
		wantExit int
		want     []string
	}{
		{false, 0, []string{"--- SKIP: TestNewDatabase", "SKIPPING POSTGRESQL TESTS", "not found", pgtest.BinEnv}},
		{true, 1, []string{"--- FAIL: TestNewDatabase", "CI=true requires them", "install-deps.sh"}},
	}
	for _, tc := range tests {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNewDatabase$", "-test.v")
		var env []string
		for _, kv := range os.Environ() {
			// (without a shared cluster to attach to: the pretend machine
			// has none)
			if !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(kv, pgtest.ClusterEnv+"=") {
				env = append(env, kv)
			}
		}
		env = append(env, pgtest.BinEnv+"="+t.TempDir())
		if tc.ci {
			env = append(env, "CI=true")
		}
		cmd.Env = env
		out, _ := cmd.CombinedOutput()
		cancel()
		if code := cmd.ProcessState.ExitCode(); code != tc.wantExit {
			t.Errorf("CI=%v: exit %d, want %d; output:\n%s", tc.ci, code, tc.wantExit, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("CI=%v: output lacks %q:\n%s", tc.ci, w, out)
			}
		}
	}
}

// TestSharedAttachesToClusterEnv: with $MAESTRO_PGTEST_CLUSTER naming a
// running cluster, Shared attaches to it instead of starting one; two
// attached test binaries' schema and database names do not collide; and
// stopping an attached cluster leaves the server running for its owner.
func TestSharedAttachesToClusterEnv(t *testing.T) {
	owner := pg.Cluster(t)
	t.Setenv(pgtest.ClusterEnv, owner.DSN("postgres", nil))
	var a, b pgtest.Shared
	ca, cb := a.Cluster(t), b.Cluster(t)
	for _, c := range []*pgtest.Cluster{ca, cb} {
		if c.TCPAddr() != owner.TCPAddr() {
			t.Fatalf("Shared started or attached to %s, want the cluster in $%s at %s", c.TCPAddr(), pgtest.ClusterEnv, owner.TCPAddr())
		}
	}
	// The same step in both binaries: names must differ, and each schema is
	// usable and isolated.
	for range 3 {
		da, db := pgtest.OpenDB(t, ca.NewSchema(t)), pgtest.OpenDB(t, cb.NewSchema(t))
		for _, q := range []string{"CREATE TABLE items (n int)", "INSERT INTO items VALUES (1)"} {
			if _, err := da.ExecContext(t.Context(), q); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.ExecContext(t.Context(), "CREATE TABLE items (n int)"); err != nil {
			t.Fatalf("the same table in the other binary's schema: %v", err)
		}
		var n int
		if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM items").Scan(&n); err != nil || n != 0 {
			t.Fatalf("the other binary's schema: %d rows, %v; want its own empty table", n, err)
		}
	}
	pgtest.OpenDB(t, ca.NewDatabase(t))
	pgtest.OpenDB(t, cb.NewDatabase(t))
	if err := ca.Stop(); err != nil {
		t.Fatalf("Stop of an attached cluster: %v", err)
	}
	if err := pgtest.OpenDB(t, owner.NewSchema(t)).PingContext(t.Context()); err != nil {
		t.Fatalf("the owner's server no longer answers after an attached Stop: %v", err)
	}
}

func TestAttachRejectsBadDSN(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct{ name, dsn, want string }{
		{"no socket directory", "postgres://postgres@/postgres?port=5432", "names no socket directory"},
		{"no port", "postgres://postgres@/postgres?host=" + dir, "names no socket directory"},
		{"no server", "postgres://postgres@/postgres?sslmode=disable&port=1&host=" + dir, "attach to the cluster"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			got, err := pgtest.Attach(ctx, c.dsn)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), pgtest.ClusterEnv) {
				t.Fatalf("Attach(%q) = %v, %v; want an error naming %s and saying %q", c.dsn, got, err, pgtest.ClusterEnv, c.want)
			}
		})
	}
}
