package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

// headlessLines runs `maestro headless` in-process with the client lines
// on stdin; stdin stays open until stdout has sent want response_end
// frames, so that the prompt's run is not cut short by end of input.
func headlessLines(t *testing.T, want int, lines []string, args ...string) result {
	t.Helper()
	in, feed := io.Pipe()
	out := newWatchOut(func(out []byte) bool {
		return want > 0 && bytes.Count(out, []byte(`"type":"response_end"`)) >= want
	})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	go func() {
		for _, l := range lines {
			io.WriteString(feed, l+"\n")
		}
		select {
		case <-out.seen:
		case <-ctx.Done():
		}
		feed.Close()
	}()
	return runCLIStreams(t, in, out, append([]string{"headless"}, args...)...)
}

var clock = regexp.MustCompile(`\b\d{2}:\d{2}\b`)

// normalised is a frame with what differs between two sessions of the
// same script replaced: ids, times, durations, and the workspace path.
func normalised(t *testing.T, f map[string]any, ws string) string {
	t.Helper()
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch {
				case x == nil:
				case strings.HasSuffix(k, "_id") && k != "call_id", strings.HasSuffix(k, "_ms"), strings.HasSuffix(k, "_at"), k == "timestamp":
					v[k] = "<" + k + ">"
				default:
					v[k] = walk(x)
				}
			}
			return v
		case []any:
			for i := range v {
				v[i] = walk(v[i])
			}
			return v
		case string:
			// Clock times in command output (ls -l).
			return clock.ReplaceAllString(strings.ReplaceAll(v, ws, "<workspace>"), "<hh:mm>")
		}
		return v
	}
	data, err := json.Marshal(walk(f))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// joinToolOutput merges consecutive tool_output frames of one call: how
// a command's output is cut into frames depends on when it arrives.
func joinToolOutput(frames []map[string]any) []map[string]any {
	var out []map[string]any
	for _, f := range frames {
		if n := len(out); n > 0 && f["type"] == "tool_output" && out[n-1]["type"] == "tool_output" && out[n-1]["call_id"] == f["call_id"] {
			out[n-1]["content"] = out[n-1]["content"].(string) + f["content"].(string)
			continue
		}
		out = append(out, f)
	}
	return out
}

// TestRunJSONLIsWhatHeadlessSends: `maestro run -o jsonl` is a local
// client of the runtime, so for the bundled replay demo it prints the
// same protocol messages, in the same order, as `maestro headless` sends
// an embedder that says hello and sends the same prompt (tool calls
// approved, as run does): ready, session_info, hello_ok,
// connection_info, then the turn. Ids, times and the workspace path are
// normalised, and a command's output is compared whole.
func TestRunJSONLIsWhatHeadlessSends(t *testing.T) {
	t.Parallel()
	const task = "Show me what you can do in this workspace"
	runWS := t.TempDir()
	run := runCLI(t, nil, "run", "--workspace", runWS, "-o", "jsonl", task)
	if run.code != 0 {
		t.Fatalf("run: exit %d\n%s", run.code, run.stderr)
	}
	runFrames := joinToolOutput(run.frames(t))
	prompt, _ := json.Marshal(map[string]string{"type": "prompt", "content": task})
	headlessWS := t.TempDir()
	ends := 0
	for _, f := range runFrames {
		if f["type"] == "response_end" {
			ends++
		}
	}
	if last := runFrames[len(runFrames)-1]["type"]; last != "response_end" {
		t.Fatalf("run's last frame is %v, want the final response_end", last)
	}
	hl := headlessLines(t, ends, []string{`{"type":"hello","protocol_version":"2026-04-02"}`, string(prompt)},
		"--workspace", headlessWS, "--approval-mode", "auto")
	if hl.code != 0 {
		t.Fatalf("headless: exit %d\n%s", hl.code, hl.stderr)
	}
	hlFrames := joinToolOutput(hl.frames(t))
	if len(hlFrames) != len(runFrames) {
		t.Errorf("run printed %d frames, headless sent %d", len(runFrames), len(hlFrames))
	}
	var types []string
	for i := range min(len(runFrames), len(hlFrames)) {
		r, h := normalised(t, runFrames[i], runWS), normalised(t, hlFrames[i], headlessWS)
		if r != h {
			t.Errorf("frame %d differs:\nrun:      %s\nheadless: %s", i, r, h)
		}
		types = append(types, runFrames[i]["type"].(string))
	}
	// The sequence is a whole session, not an empty agreement.
	want := []string{"ready", "session_info", "hello_ok", "connection_info", "response_start"}
	if len(types) < len(want) || strings.Join(types[:len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("sequence starts %v, want %v", types, want)
	}
	for _, typ := range []string{"tool_call", "tool_end", "response_end"} {
		if !strings.Contains(strings.Join(types, " "), typ) {
			t.Errorf("sequence has no %s: %v", typ, types)
		}
	}
}
