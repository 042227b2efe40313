package utility_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/transport/stdio/stdiotest"
	"github.com/maestro-run/maestro/internal/utility"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/wstest"
)

var _ = flag.Bool("update", false, "rewrite the golden transcripts in testdata/transcripts/")

// TestGoldenTranscripts plays the utility operations through the stdio
// transport exactly as an embedder does (client lines in, server lines
// out) and compares the normalised server lines with the golden files of
// testdata/transcripts (see package stdiotest for the script format).
// Every server frame is validated against the protocol's JSON Schemas.
func TestGoldenTranscripts(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"command_exec", "command_pty", "file_search", "file_read", "file_watch", "interrupt"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			base, ws := transcriptWorkspace(t)
			opts := stdiotest.Options{
				Workspace: ws,
				Utilities: func(root *workspace.Root, emit func(protocol.Message)) runtime.Utilities {
					return utility.New(utility.Config{Root: root, Emit: emit, KillGrace: 2 * time.Second})
				},
				// The directory holding the workspace and the outside
				// directory becomes $BASE, also where stdiotest's own
				// normalisation has made it $WORKSPACE/...
				Normalize: func(line string) string {
					return strings.ReplaceAll(strings.ReplaceAll(line, base, "$BASE"), "$WORKSPACE/..", "$BASE")
				},
			}
			res := stdiotest.Golden(t, opts, filepath.Join("testdata", "transcripts"), name)
			if res.Err != nil {
				t.Errorf("Serve returned %v, want nil (clean exit)", res.Err)
			}
		})
	}
}

// transcriptWorkspace makes base/ws (the workspace) and base/outside.
func transcriptWorkspace(t *testing.T) (base, ws string) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws = filepath.Join(base, "ws")
	files := map[string]string{
		"ws/notes.md":         "alpha\nbeta\ngamma\n",
		"ws/src/main.go":      "package main\n",
		"ws/src/Main_test.go": "package main\n",
		"ws/docs/readme.md":   "# Readme\n",
		"ws/.gitignore":       "ignored/\n",
		"ws/ignored/main.go":  "package ignored\n",
		"ws/.hidden/main.go":  "package hidden\n",
		"ws/blob.bin":         "\x00\x01\x02",
		"ws/sub/.keep":        "",
		"outside/secret.txt":  "secret\n",
	}
	wstest.WriteFiles(t, base, files)
	if err := os.Symlink("../outside/secret.txt", filepath.Join(ws, "escape.txt")); err != nil {
		t.Fatal(err)
	}
	return base, ws
}
