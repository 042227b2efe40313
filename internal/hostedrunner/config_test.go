package hostedrunner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	other := t.TempDir()
	file := filepath.Join(ws, "afile")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(other, "token")
	if err := os.WriteFile(tokenFile, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"MAESTRO_RUNNER_SESSION_ID": "mrs_env", "MAESTRO_WORKSPACE_ROOT": ws, "MAESTRO_HOSTED_RUNNER_LISTEN": "127.0.0.1:0"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "<unset>" {
				delete(m, kv[i])
				continue
			}
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name  string
		flags Flags
		env   map[string]string
		check func(t *testing.T, c Config)
		err   string // substring of the error; "" = no error
	}{
		{name: "state dir under MAESTRO_HOME", env: with("MAESTRO_HOME", other), check: func(t *testing.T, c Config) {
			eq(t, "state dir", c.StateDir, filepath.Join(other, "hosted-runner"))
		}},
		{name: "state dir from env", env: with("MAESTRO_HOSTED_RUNNER_STATE_DIR", filepath.Join(other, "st")), check: func(t *testing.T, c Config) {
			eq(t, "state dir", c.StateDir, filepath.Join(other, "st"))
		}},
		{name: "state dir flag beats env", flags: Flags{StateDir: filepath.Join(ws, "flag")}, env: with("MAESTRO_HOSTED_RUNNER_STATE_DIR", other), check: func(t *testing.T, c Config) {
			eq(t, "state dir", c.StateDir, filepath.Join(ws, "flag"))
		}},
		{name: "env defaults", env: base, check: func(t *testing.T, c Config) {
			eq(t, "runner", c.RunnerSessionID, "mrs_env")
			eq(t, "root", c.WorkspaceRoot, ws)
			eq(t, "listen", c.Listen, "127.0.0.1:0")
			eq(t, "snapshot root", c.SnapshotRoot, filepath.Join(ws, ".maestro", "runner-snapshots"))
			if c.RequireAuth || c.Fixture || c.OwnerInstanceID != "" {
				t.Errorf("loopback default: RequireAuth %v Fixture %v owner %q", c.RequireAuth, c.Fixture, c.OwnerInstanceID)
			}
		}},
		{name: "flag beats env", flags: Flags{RunnerSessionID: "mrs_flag", WorkspaceRoot: other, Listen: "127.0.0.1:9999"}, env: base, check: func(t *testing.T, c Config) {
			eq(t, "runner", c.RunnerSessionID, "mrs_flag")
			eq(t, "root", c.WorkspaceRoot, other)
			eq(t, "listen", c.Listen, "127.0.0.1:9999")
		}},
		{name: "aliases", env: map[string]string{"REMOTE_RUNNER_SESSION_ID": "mrs_alias", "WORKSPACE_ROOT": ws, "PORT": "7000", "MAESTRO_HOSTED_RUNNER_HOST": "127.0.0.1",
			"REMOTE_RUNNER_OWNER_INSTANCE_ID": "pod_1", "MAESTRO_WORKSPACE_ID": "ws_1", "MAESTRO_AGENT_RUN_ID": "run_1", "MAESTRO_SESSION_ID": "s_1",
			"MAESTRO_ATTACH_AUDIENCE": "aud", "REMOTE_RUNNER_SNAPSHOT_ROOT": "snaps", "REMOTE_RUNNER_RESTORE_MANIFEST": "snaps/m.json"}, check: func(t *testing.T, c Config) {
			eq(t, "runner", c.RunnerSessionID, "mrs_alias")
			eq(t, "listen", c.Listen, "127.0.0.1:7000")
			eq(t, "owner", c.OwnerInstanceID, "pod_1")
			eq(t, "workspace id", c.WorkspaceID, "ws_1")
			eq(t, "agent run", c.AgentRunID, "run_1")
			eq(t, "session", c.MaestroSessionID, "s_1")
			eq(t, "audience", c.AttachAudience, "aud")
			eq(t, "snapshot root", c.SnapshotRoot, filepath.Join(ws, "snaps"))
			eq(t, "restore", c.RestoreManifest, filepath.Join(ws, "snaps", "m.json"))
		}},
		{name: "primary env beats alias", env: with("REMOTE_RUNNER_SESSION_ID", "mrs_alias", "MAESTRO_REMOTE_RUNNER_OWNER_INSTANCE_ID", "pod_a", "REMOTE_RUNNER_OWNER_INSTANCE_ID", "pod_b",
			"MAESTRO_REMOTE_RUNNER_WORKSPACE_ID", "ws_a", "MAESTRO_WORKSPACE_ID", "ws_b", "MAESTRO_REMOTE_RUNNER_RESTORE_MANIFEST", "/abs/m.json", "REMOTE_RUNNER_RESTORE_MANIFEST", "x.json"), check: func(t *testing.T, c Config) {
			eq(t, "runner", c.RunnerSessionID, "mrs_env")
			eq(t, "owner", c.OwnerInstanceID, "pod_a")
			eq(t, "workspace id", c.WorkspaceID, "ws_a")
			eq(t, "restore", c.RestoreManifest, "/abs/m.json")
		}},
		{name: "owner flag beats env", flags: Flags{OwnerInstanceID: "pod_flag", SnapshotRoot: other}, env: with("MAESTRO_REMOTE_RUNNER_OWNER_INSTANCE_ID", "pod_env"), check: func(t *testing.T, c Config) {
			eq(t, "owner", c.OwnerInstanceID, "pod_flag")
			eq(t, "snapshot root", c.SnapshotRoot, other)
		}},
		{name: "bare port listen flag", flags: Flags{Listen: "9090"}, env: with("MAESTRO_WEB_API_KEY", "k"), check: func(t *testing.T, c Config) {
			eq(t, "listen", c.Listen, "0.0.0.0:9090")
		}},
		{name: "host and port flags", flags: Flags{Host: "127.0.0.1", Port: "8181"}, env: with("MAESTRO_HOSTED_RUNNER_PORT", "1"), check: func(t *testing.T, c Config) {
			eq(t, "listen", c.Listen, "127.0.0.1:8181")
		}},
		{name: "port flag, host from env", flags: Flags{Port: "8282"}, env: with("MAESTRO_HOSTED_RUNNER_HOST", "::1"), check: func(t *testing.T, c Config) {
			eq(t, "listen", c.Listen, "[::1]:8282")
		}},
		{name: "default listen needs a token", env: with("MAESTRO_HOSTED_RUNNER_LISTEN", "<unset>"), err: "MAESTRO_HOSTED_RUNNER_AUTH_TOKEN"},
		{name: "default listen with token", env: with("MAESTRO_HOSTED_RUNNER_LISTEN", "<unset>", "MAESTRO_WEB_API_KEY", "k"), check: func(t *testing.T, c Config) {
			eq(t, "listen", c.Listen, "0.0.0.0:8080")
			eq(t, "token", c.AuthToken, "k")
			if !c.RequireAuth {
				t.Error("RequireAuth false on 0.0.0.0")
			}
		}},
		{name: "token file", flags: Flags{AuthTokenFile: tokenFile, Listen: "0.0.0.0:1"}, env: base, check: func(t *testing.T, c Config) {
			eq(t, "token", c.AuthToken, "s3cret")
		}},
		{name: "token file env", env: with("MAESTRO_HOSTED_RUNNER_AUTH_TOKEN_FILE", tokenFile), check: func(t *testing.T, c Config) {
			eq(t, "token", c.AuthToken, "s3cret")
		}},
		{name: "missing token file", env: with("MAESTRO_HOSTED_RUNNER_AUTH_TOKEN_FILE", filepath.Join(other, "nope")), err: "--auth-token-file or MAESTRO_HOSTED_RUNNER_AUTH_TOKEN_FILE"},
		{name: "require auth on loopback", env: with("MAESTRO_WEB_REQUIRE_KEY", "1"), err: "auth is required"},
		{name: "require auth off beyond loopback", flags: Flags{Listen: "0.0.0.0:1", RequireAuth: "false"}, env: base, err: "without a token would let anyone"},
		{name: "require auth off beyond loopback with token", flags: Flags{Listen: "0.0.0.0:1", RequireAuth: "false"}, env: with("MAESTRO_WEB_API_KEY", "k"), err: "without a token would let anyone"},
		{name: "require auth off on loopback", flags: Flags{RequireAuth: "false"}, env: base, check: func(t *testing.T, c Config) {
			if c.RequireAuth {
				t.Error("RequireAuth true despite --require-auth=false")
			}
		}},
		{name: "allowed hosts flag", flags: Flags{AllowedHosts: []string{"runner.example.com"}}, env: with("MAESTRO_HOSTED_RUNNER_ALLOWED_HOSTS", "x.example"), check: func(t *testing.T, c Config) {
			eq(t, "allowed hosts", strings.Join(c.AllowedHosts, ","), "runner.example.com")
		}},
		{name: "allowed hosts env", env: with("MAESTRO_HOSTED_RUNNER_ALLOWED_HOSTS", "a.example, b.example"), check: func(t *testing.T, c Config) {
			eq(t, "allowed hosts", strings.Join(c.AllowedHosts, ","), "a.example,b.example")
		}},
		{name: "any host needs a token", env: with("MAESTRO_HOSTED_RUNNER_ALLOWED_HOSTS", "*"), err: "needs a bearer token"},
		{name: "bad allowed host", flags: Flags{AllowedHosts: []string{"http://x/"}}, env: base, err: "--allowed-host"},
		{name: "bad require auth", env: with("MAESTRO_WEB_REQUIRE_KEY", "maybe"), err: "MAESTRO_WEB_REQUIRE_KEY"},
		{name: "fixture env", env: with("MAESTRO_HOSTED_RUNNER_FIXTURE", "1"), check: func(t *testing.T, c Config) {
			if !c.Fixture {
				t.Error("Fixture false")
			}
		}},
		{name: "conformance env selects the fixture", env: with("MAESTRO_RUST_HOSTED_CONFORMANCE", "1"), check: func(t *testing.T, c Config) {
			if !c.Fixture {
				t.Error("Fixture false")
			}
		}},
		{name: "bad fixture env", env: with("MAESTRO_HOSTED_RUNNER_FIXTURE", "sure"), err: "MAESTRO_HOSTED_RUNNER_FIXTURE"},
		{name: "max connections default", env: base, check: func(t *testing.T, c Config) {
			if c.MaxConns != 1024 {
				t.Errorf("MaxConns %d, want 1024", c.MaxConns)
			}
		}},
		{name: "max connections env", env: with("MAESTRO_HOSTED_RUNNER_MAX_CONNECTIONS", "64"), check: func(t *testing.T, c Config) {
			if c.MaxConns != 64 {
				t.Errorf("MaxConns %d, want 64", c.MaxConns)
			}
		}},
		{name: "max connections flag wins", flags: Flags{MaxConnections: "8"}, env: with("MAESTRO_HOSTED_RUNNER_MAX_CONNECTIONS", "64"), check: func(t *testing.T, c Config) {
			if c.MaxConns != 8 {
				t.Errorf("MaxConns %d, want 8", c.MaxConns)
			}
		}},
		{name: "bad max connections", flags: Flags{MaxConnections: "0"}, env: base, err: `--max-connections or MAESTRO_HOSTED_RUNNER_MAX_CONNECTIONS "0": expected a positive number`},
		{name: "missing runner id", env: with("MAESTRO_RUNNER_SESSION_ID", "<unset>"), err: "--runner-session-id or MAESTRO_RUNNER_SESSION_ID / REMOTE_RUNNER_SESSION_ID"},
		// Ids were taken whatever they were: a runner id too long to name
		// the drain's files made every drain fail.
		{name: "runner id too long", env: with("MAESTRO_RUNNER_SESSION_ID", strings.Repeat("r", MaxRunnerSessionID+1)), err: "--runner-session-id or MAESTRO_RUNNER_SESSION_ID / REMOTE_RUNNER_SESSION_ID: expected an id of at most 200 bytes, found 201"},
		{name: "runner id with a space", env: with("MAESTRO_RUNNER_SESSION_ID", "mrs 1"), err: `"mrs 1": expected an id without spaces or control characters`},
		{name: "session id with a newline", env: with("MAESTRO_SESSION_ID", "s\n1"), err: `--maestro-session-id or MAESTRO_SESSION_ID: "s\n1": expected an id without spaces`},
		{name: "agent run id too long", flags: Flags{AgentRunID: strings.Repeat("a", MaxLaunchID+1)}, env: base, err: "--agent-run-id or MAESTRO_AGENT_RUN_ID: expected an id of at most 256 bytes"},
		{name: "missing workspace", env: with("MAESTRO_WORKSPACE_ROOT", "<unset>"), err: "--workspace-root or MAESTRO_WORKSPACE_ROOT / WORKSPACE_ROOT"},
		{name: "workspace does not exist", env: with("MAESTRO_WORKSPACE_ROOT", filepath.Join(ws, "nope")), err: "must be an existing directory"},
		{name: "workspace is a file", env: with("MAESTRO_WORKSPACE_ROOT", file), err: "it is a file"},
		{name: "bad port", flags: Flags{Listen: "127.0.0.1:http"}, env: base, err: "--listen"},
		{name: "port out of range", env: with("MAESTRO_HOSTED_RUNNER_LISTEN", "127.0.0.1:70000"), err: "MAESTRO_HOSTED_RUNNER_LISTEN"},
		{name: "no port", env: with("MAESTRO_HOSTED_RUNNER_LISTEN", "127.0.0.1"), err: "expected host:port or a bare port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Load(tt.flags, func(k string) string { return tt.env[k] })
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func eq(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}
