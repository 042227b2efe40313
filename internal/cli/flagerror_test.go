package cli

import (
	"strings"
	"testing"
)

// TestFlagValueErrors: a value its flag's type refuses is a usage error
// naming the flag, the value and what was expected; pflag's own words
// ("strconv.ParseInt: parsing …: invalid syntax") were printed.
func TestFlagValueErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--max-connections", "abc"}, `--max-connections "abc": expected a whole number`},
		{[]string{"run", "--max-iterations", "x", "hi"}, `--max-iterations "x": expected a whole number`},
		{[]string{"serve", "--max-connections", "99999999999999999999"}, `--max-connections "99999999999999999999": out of range (expected a whole number)`},
		{[]string{"serve", "--session-stale-after", "5"}, `--session-stale-after "5": expected a duration such as 30s, 5m or 1h30m`},
		{[]string{"tasks", "list", "--json=maybe"}, `--json "maybe": expected true or false`},
		{[]string{"run", "--workspace"}, `flag needs an argument: --workspace`},
		// Out of range: -1s and 0s were silently 30s, 2ns crashed the
		// serve; events smoke passed a negative timeout on to NATS.
		{[]string{"serve", "--session-stale-after", "-1s"}, `--session-stale-after must be at least 300ms, got -1s`},
		{[]string{"serve", "--session-stale-after", "2ns"}, `--session-stale-after must be at least 300ms, got 2ns`},
		{[]string{"events", "smoke", "--timeout", "0s"}, `--timeout must be positive, got 0s`},
		// A --name the store cannot record: on SQLite the process started
		// and every claim failed ('workers[0]: expected at most 128 bytes').
		{[]string{"worker", "--name", strings.Repeat("w", 127)}, `--name: expected at most 100 bytes (a job's lease owner is NAME/N), found 127`},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--name", strings.Repeat("s", 101)}, `--name: expected at most 100 bytes (a job's lease owner is NAME/N), found 101`},
		{[]string{"worker", "--name", " "}, `--name: expected a name such as worker-1, found only spaces (leave it out for host:pid)`},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--name", "a\tb"}, `--name "a\tb": expected one line of text, without control characters`},
		{[]string{"tasks", "submit", "x", "--max-attempts", "0", "--server", "http://127.0.0.1:1"}, `--max-attempts 0: expected 1-100`},
		// The server refused them (exit 1, in the API's words: "extra:
		// expected 0-100 more attempts (0 means 1)"); a path out of
		// output/ was refused after the listing was fetched.
		{[]string{"tasks", "retry", "1", "--extra", "-5", "--server", "http://127.0.0.1:1"}, `--extra -5: expected 1-100`},
		{[]string{"tasks", "retry", "1", "--extra", "0", "--server", "http://127.0.0.1:1"}, `--extra 0: expected 1-100`},
		{[]string{"tasks", "logs", "1", "--after", "-1", "--server", "http://127.0.0.1:1"}, `--after -1: expected an event number, 0 or more`},
		{[]string{"tasks", "submit", "x", "--payload", "[1]", "--server", "http://127.0.0.1:1"}, `--payload: expected a JSON object, found "[1]"`},
		{[]string{"tasks", "submit", "x", "--file", ".", "--server", "http://127.0.0.1:1"}, `--file .: a directory; --file takes a file (one --file per file)`},
		{[]string{"tasks", "download", "1", "../x", "--server", "http://127.0.0.1:1"}, `deliverable path "../x": expected a relative path inside output/, without .. segments`},
		{[]string{"serve", "--listen", "127.0.0.1:99999"}, `--listen 127.0.0.1:99999: port "99999" is not a number from 0 to 65535`},
		// A flag given no value took the next flag as its value, and the
		// run failed far from it ("open --piece: no such file or directory").
		{[]string{"run", "--replay", "--piece", "general", "hi"}, `--replay needs a value before the next flag: it took "--piece", which is a flag (usage: maestro run [flags] TASK...)`},
		{[]string{"run", "-w", "-m", "replay/demo", "hi"}, `--workspace needs a value before the next flag: it took "-m", which is a flag (usage: maestro run [flags] TASK...)`},
		{[]string{"serve", "--token", "--listen=127.0.0.1:0"}, `--token needs a value before the next flag: it took "--listen=127.0.0.1:0", which is a flag (usage: maestro serve [flags])`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, map[string]string{"MAESTRO_EVENT_BUS_URL": "nats://127.0.0.1:1"}, tc.args...)
			first, _, _ := strings.Cut(r.stderr, "\n")
			if r.code != ExitUsage || first != "maestro: "+tc.want || !strings.Contains(r.stderr, "--help' for usage") {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and first line %q", r.code, r.stderr, ExitUsage, "maestro: "+tc.want)
			}
		})
	}
}

// TestArgCountErrorsShowUsage: a missing or extra argument names the
// command's usage line; cobra's "accepts 1 arg(s), received 0" alone did
// not say which argument was missing.
func TestArgCountErrorsShowUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "requires at least 1 arg(s), only received 0 (usage: maestro run [flags] TASK...)"},
		{[]string{"sessions", "show"}, "accepts 1 arg(s), received 0 (usage: maestro sessions show [--agent ID] SESSION_ID [flags])"},
		{[]string{"tasks", "comment", "1"}, "accepts 2 arg(s), received 1 (usage: maestro tasks comment ID TEXT [flags])"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, map[string]string{}, tc.args...)
			first, _, _ := strings.Cut(r.stderr, "\n")
			if r.code != ExitUsage || first != "maestro: "+tc.want {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and first line %q", r.code, r.stderr, ExitUsage, "maestro: "+tc.want)
			}
		})
	}
}
