package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Maestro's own sessions can be found: `maestro sessions list|show` show
// them, every resume hint prints the shortest prefix that names the
// session alone, and an ambiguous prefix lists its candidates (issue 15
// item 5). Session ids start with their creation time, so the three
// sessions started here within a minute share their first 8 characters
// (at least two of them do: three sessions span at most two of the
// 65-second windows an 8-character prefix covers).
func TestMaestroSessionsCanBeFound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	scenario := filepath.Join(dir, "two-turns.json")
	if err := os.WriteFile(scenario, []byte(`{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"two-turns","description":"a follow-up turn",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":[]},
"frames":[{"index":0,"statements":[{"kind":"text","text":"first answer"}]},
{"index":1,"statements":[{"kind":"text","text":"second answer"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	hintRE := regexp.MustCompile(`session (\S+) · resume with: maestro run --resume (\S+) "…"`)
	type started struct{ id, hint, prompt, ws string }
	var runs []started
	for _, prompt := range []string{"fix the parser\nand its test", "say hello", "write the docs"} {
		ws := t.TempDir()
		_, stderr := runMaestro(t, home, true, "run", "--replay", scenario, "--workspace", ws, prompt)
		m := hintRE.FindStringSubmatch(stderr)
		if m == nil {
			t.Fatalf("no resume hint in:\n%s", stderr)
		}
		runs = append(runs, started{id: m[1], hint: m[2], prompt: prompt, ws: ws})
	}
	byPrefix := map[string][]started{}
	for _, r := range runs {
		byPrefix[r.id[:8]] = append(byPrefix[r.id[:8]], r)
	}
	var shared []started
	for _, group := range byPrefix {
		if len(group) > len(shared) {
			shared = group
		}
	}
	if len(shared) < 2 {
		t.Fatalf("three sessions of the same minute should share an 8-character prefix: %+v", runs)
	}

	t.Run("hints print the shortest unique prefix", func(t *testing.T) {
		for _, r := range runs {
			if !strings.HasPrefix(r.id, r.hint) || len(r.hint) < 8 || len(r.hint) >= len(r.id) {
				t.Errorf("hint %q for session %s: want a proper prefix of 8+ characters", r.hint, r.id)
			}
		}
		for _, r := range shared {
			if len(r.hint) <= 8 {
				t.Errorf("hint %q for session %s, which shares its first 8 characters: not unique", r.hint, r.id)
			}
		}
	})

	t.Run("an ambiguous prefix lists the candidates", func(t *testing.T) {
		_, stderr := runMaestro(t, home, false, "run", "--resume", shared[0].id[:8], "go on")
		if !strings.Contains(stderr, "is ambiguous") {
			t.Errorf("stderr lacks the ambiguity:\n%s", stderr)
		}
		for _, r := range shared {
			first, _, _ := strings.Cut(r.prompt, "\n")
			if !regexp.MustCompile(regexp.QuoteMeta(r.id) + `  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  ` + regexp.QuoteMeta(first) + "\n").MatchString(stderr + "\n") {
				t.Errorf("stderr does not list %s with its time and first prompt %q:\n%s", r.id, first, stderr)
			}
		}
		_, stderr = runMaestro(t, home, false, "sessions", "show", shared[0].id[:8])
		if !strings.Contains(stderr, shared[0].id) || !strings.Contains(stderr, shared[1].id) {
			t.Errorf("sessions show with an ambiguous prefix: want the candidates:\n%s", stderr)
		}
	})

	t.Run("list", func(t *testing.T) {
		out, _ := runMaestro(t, home, true, "sessions", "list")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") {
			t.Fatalf("want a header and three sessions:\n%s", out)
		}
		for i, r := range runs {
			line := lines[3-i] // newest first
			first, _, _ := strings.Cut(r.prompt, "\n")
			if short, _, _ := strings.Cut(line, " "); len(short) < 8 || !strings.HasPrefix(r.id, short) {
				t.Errorf("line of session %s does not start with a prefix of its id: %s", r.id, line)
			}
			for _, w := range []string{"replay " + scenario, "answered", r.ws, first} {
				if !strings.Contains(line, w) {
					t.Errorf("line of session %s lacks %q: %s", r.id, w, line)
				}
			}
		}
		out, _ = runMaestro(t, home, true, "sessions", "list", "--json", "--cwd", runs[1].ws)
		var list []struct {
			ID, Workspace, Executor, Status, Log string
			ShortID                              string `json:"short_id"`
			FirstPrompt                          string `json:"first_prompt"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("list --json: %v\n%s", err, out)
		}
		r := runs[1]
		if len(list) != 1 || list[0].ID != r.id || list[0].Executor != "replay" || list[0].Status != "answered" || list[0].Workspace != r.ws || list[0].FirstPrompt != r.prompt || !strings.HasPrefix(r.id, list[0].ShortID) {
			t.Errorf("list --json --cwd %s = %+v, want session %s alone", r.ws, list, r.id)
		}
		if _, err := os.Stat(list[0].Log); err != nil {
			t.Errorf("log %q: %v", list[0].Log, err)
		}
	})

	t.Run("show, and the hint resumes", func(t *testing.T) {
		r := shared[0]
		out, _ := runMaestro(t, home, true, "run", "--resume", r.hint, "tell me more")
		if strings.TrimSpace(out) != "second answer" {
			t.Fatalf("resume %s: stdout %q, want the scripted follow-up", r.hint, out)
		}
		out, _ = runMaestro(t, home, true, "sessions", "show", r.hint)
		for _, w := range []string{"session   " + r.id, "executor  replay " + scenario, "status    answered", "] user\n  fix the parser\n  and its test", "first answer", "] user\n  tell me more", "second answer"} {
			if !strings.Contains(out, w) {
				t.Errorf("show lacks %q:\n%s", w, out)
			}
		}
		out, _ = runMaestro(t, home, true, "sessions", "show", r.id, "--json")
		var shown struct {
			Session  struct{ ID, Status string }
			Messages []struct{ Role, Text string }
		}
		if err := json.Unmarshal([]byte(out), &shown); err != nil {
			t.Fatalf("show --json: %v\n%s", err, out)
		}
		if shown.Session.ID != r.id || len(shown.Messages) != 4 || shown.Messages[3].Role != "assistant" || shown.Messages[3].Text != "second answer" {
			t.Errorf("show --json = %+v", shown)
		}
	})
}
