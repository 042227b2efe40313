package stdio_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/protocol/prototest"
	"github.com/maestro-run/maestro/internal/runtime"
	"github.com/maestro-run/maestro/internal/session"
	"github.com/maestro-run/maestro/internal/transport/stdio/stdiotest"
)

var _ = flag.Bool("update", false, "rewrite the golden transcripts in testdata/")

func scenario(name string) string { return filepath.Join("testdata", "scenarios", name+".yaml") }

// TestGoldenTranscripts plays every client script of testdata/ through the
// stdio transport and compares the normalised server lines with the golden
// file (see package stdiotest for the script format).
func TestGoldenTranscripts(t *testing.T) {
	t.Parallel()
	openInEditor := runtime.ClientTool{
		Name:        "open_in_editor",
		Description: "Open a file in the user's editor.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"line":{"type":"integer"}},"required":["path"]}`),
	}
	tests := []struct {
		name string
		opts stdiotest.Options
	}{
		{"handshake", stdiotest.Options{}},
		{"handshake_version", stdiotest.Options{}},
		{"opt_out", stdiotest.Options{}},
		{"prompt_streamed", stdiotest.Options{Scenario: scenario("streamed")}},
		{"prompt_before_hello", stdiotest.Options{}},
		{"two_prompts", stdiotest.Options{Scenario: scenario("twoprompts")}},
		{"approval", stdiotest.Options{Scenario: scenario("approval")}},
		{"approval_modes", stdiotest.Options{Scenario: scenario("modes")}},
		{"tool_retry", stdiotest.Options{Scenario: scenario("retry")}},
		{"user_input", stdiotest.Options{Scenario: scenario("ask")}},
		{"client_tool", stdiotest.Options{Scenario: scenario("clienttool"), ClientTools: []runtime.ClientTool{openInEditor}}},
		{"interrupt_mid_tool", stdiotest.Options{Scenario: scenario("sleep")}},
		{"interrupt_pending", stdiotest.Options{Scenario: scenario("sleep")}},
		{"viewer", stdiotest.Options{}},
		{"unknown_type", stdiotest.Options{}},
		{"unknown_field", stdiotest.Options{}},
		{"malformed_json", stdiotest.Options{}},
		{"oversize_line", stdiotest.Options{}},
		{"protocol_errors", stdiotest.Options{}},
		{"utility_capability", stdiotest.Options{}},
		{"shutdown", stdiotest.Options{Scenario: scenario("sleep")}},
		{"stdin_eof", stdiotest.Options{Scenario: scenario("sleep")}},
		{"raw_events", stdiotest.Options{}},
		{"attachments", stdiotest.Options{Workspace: attachmentWorkspace(t)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := stdiotest.Golden(t, tt.opts, "testdata", tt.name)
			if res.Err != nil {
				t.Errorf("Serve returned %v, want nil (clean exit)", res.Err)
			}
		})
	}
}

// attachmentWorkspace holds a text file, a PNG, a binary file, an empty
// file and a directory.
func attachmentWorkspace(t *testing.T) string {
	dir := t.TempDir()
	files := map[string]string{
		"notes.md":  "# Notes\nalpha\n",
		"pixel.png": "\x89PNG\r\n\x1a\n",
		"blob.bin":  "\x00\x01\x02",
		"empty.txt": "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestShutdownFlushesSessionLog checks that what the client saw is in the
// session log when the transport returns, with the conversation.
func TestShutdownFlushesSessionLog(t *testing.T) {
	t.Parallel()
	res := stdiotest.Run(t, stdiotest.Options{Scenario: scenario("streamed")}, `
{"type":"prompt","content":"Say hello."}
@idle
{"type":"shutdown"}
`)
	if res.Err != nil {
		t.Fatalf("Serve: %v", res.Err)
	}
	var types []string
	var messages int
	store := session.NewStore(filepath.Dir(filepath.Dir(res.LogPath)))
	id := filepath.Base(filepath.Dir(res.LogPath))
	for rec, err := range store.Records(id, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == session.KindMessage {
			messages++
			continue
		}
		types = append(types, rec.EventType())
	}
	var wire []string
	for _, l := range res.Raw {
		var head struct{ Type string }
		_ = json.Unmarshal([]byte(l), &head)
		wire = append(wire, head.Type)
	}
	if strings.Join(types, " ") != strings.Join(wire, " ") {
		t.Errorf("session log events = %v, wire = %v", types, wire)
	}
	metas, err := store.List()
	if err != nil || len(metas) != 1 || metas[0].Title != "Say hello." {
		t.Errorf("session metadata = %+v, %v; want the first prompt as title", metas, err)
	}
	if messages != 2 {
		t.Errorf("session log holds %d conversation messages, want 2 (prompt and answer)", messages)
	}
	snap := res.Runtime.Snapshot()
	if snap.State.IsReady || snap.State.IsResponding {
		t.Errorf("after shutdown is_ready=%v is_responding=%v, want false/false", snap.State.IsReady, snap.State.IsResponding)
	}
	data, err := protocol.Marshal(protocol.SnapshotEnvelope{Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	if err := prototest.Validator(t).ValidateEnvelope(data); err != nil {
		t.Errorf("snapshot does not validate: %v\n%s", err, data)
	}
}
