package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/store/sqlite"
)

// TestStoreFlagsAreUsageErrors: a --db or --artifacts serve and worker
// cannot use is a usage error (exit 2, pointing at the command's help),
// found before anything is opened; they exited 1 as if a store had failed.
func TestStoreFlagsAreUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--listen", "127.0.0.1:0", "--db", "mysql://x"}, "--db: expected a postgres://"},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--artifacts", "relative/dir"}, `--artifacts "relative/dir": expected s3://bucket/prefix or an absolute directory`},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--artifacts", "s3://"}, `--artifacts "s3://": expected s3://bucket/prefix`},
		{[]string{"worker", "--db", "mysql://x"}, "--db: expected a postgres://"},
		{[]string{"worker", "--artifacts", "relative/dir"}, `--artifacts "relative/dir": expected s3://bucket/prefix or an absolute directory`},
		{[]string{"worker", "--artifacts", "s3:///prefix"}, `--artifacts "s3:///prefix": expected s3://bucket/prefix`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := append(append([]string{}, tc.args...), "--data-dir", dir)
			code, _, errOut := runTasksCLI(t, map[string]string{"MAESTRO_HOME": dir}, args...)
			help := "Run 'maestro " + tc.args[0] + " --help' for usage."
			if code != ExitUsage || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, help) {
				t.Fatalf("exit %d, want %d with %q and %q:\n%s", code, ExitUsage, tc.want, help, errOut)
			}
		})
	}
}

// TestDatabaseInUseSaysStopping: a serve or worker started while another
// holds the SQLite database (a serve still finishing its shutdown) is told
// it may be stopping and to retry, not only to stop it.
func TestDatabaseInUseSaysStopping(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"serve", "worker"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			st, err := sqlite.Open(t.Context(), filepath.Join(dir, "maestro.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			args := []string{cmd, "--data-dir", dir}
			if cmd == "serve" {
				args = append(args, "--listen", "127.0.0.1:0")
			}
			code, _, errOut := runTasksCLI(t, map[string]string{"MAESTRO_HOME": dir}, args...)
			if code != ExitError || !strings.Contains(errOut, "database in use") ||
				!strings.Contains(errOut, "may still be finishing its shutdown") || !strings.Contains(errOut, "retry in a few seconds") {
				t.Fatalf("exit %d:\n%s", code, errOut)
			}
		})
	}
}
