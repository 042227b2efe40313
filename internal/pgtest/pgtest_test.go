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
	elapsed := time.Since(start)
	t.Logf("cluster started in %s", elapsed)
	// About 1 s on an idle 2-core machine; the bound leaves room for a
	// loaded CI runner without hiding a hang.
	if elapsed > 10*time.Second {
		t.Errorf("cluster took %s to start, want a few seconds at most", elapsed)
	}
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
			if !strings.HasPrefix(kv, "CI=") {
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
