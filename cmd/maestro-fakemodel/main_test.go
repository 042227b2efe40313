package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// asMainEnv, set in a test binary's environment, makes it run the
// command's main instead of the tests: the test binary is the command (no
// go build and link of a second binary).
const asMainEnv = "MAESTRO_FAKEMODEL_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The server runs as a separate process and answers a real streaming
// request in the Anthropic format, then exits when stdin closes.
func TestStandaloneProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	script := filepath.Join(dir, "script.json")
	os.WriteFile(script, []byte(`[{"text":["Hello ","from the fake"],"input_tokens":3,"output_tokens":4}]`), 0o600)

	cmd := exec.CommandContext(ctx, bin, "--script", script)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no ready line: %v", err)
	}
	var ready struct{ URL string }
	if err := json.Unmarshal([]byte(line), &ready); err != nil || !strings.HasPrefix(ready.URL, "http://127.0.0.1:") {
		t.Fatalf("ready line %q: %v", line, err)
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", ready.URL+"/v1/messages",
		strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"event: message_start", `"text":"from the fake"`, "event: message_stop"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("stream lacks %q:\n%s", want, body)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after stdin EOF: %v", err)
	}
}

func TestLoadScriptErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := map[string]string{
		"[]":                     "the script has no turns",
		`[{"txt":["a"]}]`:        `unknown field "txt"`,
		"[{\n\"status\":\"x\"}]": ":2:",
		"{":                      "expected an array of turns",
		// A value of the wrong type is said in JSON's words, not Go's
		// ("expected []string, got string").
		`[{"text":"hi"}]`:               `s.json:1:14: field text: expected a JSON array, found JSON string`,
		`[{"input_tokens":"9"}]`:        `field input_tokens: expected an integer, found JSON string`,
		`[{"tool_calls":[{"name":1}]}]`: `field tool_calls.name: expected a string, found JSON number`,
		`{"text":["a"]}`:                `: expected an array of turns, found JSON object`,
		// An unknown key is named with its place (docs/fakemodel.md),
		// in a turn or in one of its tool calls, and not where the
		// same word is escaped inside a string.
		"[{\"text\":[\"a\"]},\n {\"bogus\": 1}]":                                                       `s.json:2:3: turn 2: unknown field "bogus"`,
		"[\n {\"tool_calls\": [{\"name\": \"Bash\", \"input\": \"{\\\"nope\\\": 1}\", \"nope\": 2}]}]": `s.json:2:61: turn 1: unknown field "nope"`,
	}
	for body, want := range cases {
		p := filepath.Join(dir, "s.json")
		os.WriteFile(p, []byte(body), 0o600)
		if _, err := loadScript(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want containing %q", body, err, want)
		}
	}
}

// --help says what the server is for and gives an example, then the flags.
func TestHelpTeaches(t *testing.T) {
	t.Parallel()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--help")
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, want := range []string{"scripted fake model", "Example:", "maestro-fakemodel --script turns.json", "OPENAI_BASE_URL=", "-loop"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
}
