package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// helperEnv makes the test binary act as a second process opening a store.
const helperEnv = "MAESTRO_SQLITE_OPEN_HELPER"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperEnv); path != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			fmt.Println(err)
			if errors.Is(err, sqlite.ErrLocked) {
				os.Exit(3)
			}
			os.Exit(1)
		}
		s.Close()
		fmt.Println("opened")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestSecondProcessFailsFast(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "maestro.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := func() (string, int) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+path)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if elapsed := time.Since(start); elapsed > 10*time.Second {
			t.Errorf("the second process took %s to give up; want it to fail fast", elapsed)
		}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("run helper: %v", err)
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := run()
	if code != 3 {
		t.Fatalf("second process: exit %d, output %q; want ErrLocked (exit 3)", code, out)
	}
	for _, want := range []string{"in use by another process", "process " + strconv.Itoa(os.Getpid()), "postgres://"} {
		if !strings.Contains(out, want) {
			t.Errorf("error %q does not mention %q", strings.TrimSpace(out), want)
		}
	}
	// Once the first process lets go, the second opens fine.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if out, code := run(); code != 0 {
		t.Fatalf("after Close: exit %d, output %q", code, out)
	}
}

func TestPragmasOnEveryConnection(t *testing.T) {
	t.Parallel()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "m.db"), sqlite.Options{Readers: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writer, reader := s.Pools()
	if got := writer.Stats().MaxOpenConnections; got != 1 {
		t.Errorf("writer pool allows %d connections, want 1", got)
	}
	if got := reader.Stats().MaxOpenConnections; got != 3 {
		t.Errorf("reader pool allows %d connections, want 3", got)
	}
	ctx := t.Context()
	// Hold several reader connections at once so the checks cover more
	// than one pooled connection.
	var conns []*sql.Conn
	for range 3 {
		c, err := reader.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	wc, err := writer.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conns = append(conns, wc)
	for i, c := range conns {
		want := map[string]string{"journal_mode": "wal", "busy_timeout": "30000", "foreign_keys": "1", "synchronous": "1"}
		if i < 3 {
			want["query_only"] = "1"
		} else {
			want["query_only"] = "0"
		}
		for name, w := range want {
			var got string
			if err := c.QueryRowContext(ctx, "PRAGMA "+name).Scan(&got); err != nil {
				t.Fatalf("PRAGMA %s: %v", name, err)
			}
			if got != w {
				t.Errorf("connection %d: PRAGMA %s = %s, want %s", i, name, got, w)
			}
		}
		c.Close()
	}
}

func TestCloseAndBadPaths(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "nested", "dir")
	s, err := sqlite.Open(t.Context(), filepath.Join(dir, "m.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("Open in a directory that does not exist yet: %v", err)
	}
	if s.Path() != filepath.Join(dir, "m.db") {
		t.Errorf("Path() = %s", s.Path())
	}
	b, err := os.ReadFile(filepath.Join(dir, "m.db.lock"))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q, %v; want our pid", b, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Subscribe(t.Context(), "x"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Subscribe after Close = %v, want ErrClosed", err)
	}
	for _, bad := range []string{"", "a?b.db", "x#y.db"} {
		if _, err := sqlite.Open(t.Context(), bad, sqlite.Options{}); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}
