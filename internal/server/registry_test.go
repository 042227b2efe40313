package server_test

import (
	"net/http"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/secrets"
	"github.com/maestro-run/maestro/internal/secrets/secretstest"
	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/tool/sshtest"
)

// sshKeys returns a private key (OpenSSH PEM) and a host public key line.
func sshKeys(t *testing.T) (private, hostKey string) {
	t.Helper()
	_, key := sshtest.NewKeyFile(t)
	host := sshtest.NewSigner(t).PublicKey()
	return string(key), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(host)))
}

// TestMCPServersAPI: secrets are sealed at rest, answered as "***", kept
// by "***" on a PUT; without a key a secret is refused naming the field
// and the variable, a record without secrets is accepted.
func TestMCPServersAPI(t *testing.T) {
	t.Parallel()
	box := secretstest.Box(t, 3)
	onEachBackendWith(t, func(c *server.Config) { c.Secrets = box }, func(t *testing.T, e *env) {
		var m api.MCPServer
		e.must(http.StatusCreated, "POST", api.MCPServersPath, api.MCPServerRequest{Slug: "gh", Transport: "stdio", Command: "gh-mcp",
			Args: []string{"--ro"}, Env: map[string]string{"GH_TOKEN": "ghp_plaintext"}}, &m)
		if m.Slug != "gh" || m.Owner != "local" || m.Env["GH_TOKEN"] != api.Redacted || m.Command != "gh-mcp" {
			t.Fatalf("created %+v", m)
		}
		rec, err := e.st.GetMCPServer(t.Context(), "gh")
		if err != nil {
			t.Fatal(err)
		}
		if v, err := box.OpenString(rec.Env["GH_TOKEN"], store.MCPSecretPurpose("gh", "env", "GH_TOKEN")); err != nil || v != "ghp_plaintext" {
			t.Fatalf("stored env value opens to %q, %v", v, err)
		}
		sealed := rec.Env["GH_TOKEN"]
		_, body := e.do("GET", api.MCPServersPath, nil)
		if strings.Contains(string(body), "ghp_plaintext") || strings.Contains(string(body), sealed) {
			t.Fatalf("the list leaks the secret: %s", body)
		}

		e.must(http.StatusOK, "PUT", api.MCPServersPath+"/gh", api.MCPServerRequest{Transport: "stdio", Command: "gh-mcp2",
			Env: map[string]string{"GH_TOKEN": api.Redacted, "OTHER": "x"}}, &m)
		rec, _ = e.st.GetMCPServer(t.Context(), "gh")
		if rec.Env["GH_TOKEN"] != sealed || rec.Command != "gh-mcp2" || !secrets.IsSealed(rec.Env["OTHER"]) {
			t.Fatalf("after PUT with ***: %+v", rec)
		}
		if ae := e.wantError(http.StatusUnprocessableEntity, "PUT", api.MCPServersPath+"/gh", api.MCPServerRequest{Transport: "stdio", Command: "x",
			Env: map[string]string{"NEW": api.Redacted}}); ae.Field != "env.NEW" {
			t.Fatalf("*** for an unknown name: %+v", ae)
		}
		for _, tc := range []struct {
			req   api.MCPServerRequest
			field string
		}{
			{api.MCPServerRequest{Slug: "a__b", Transport: "stdio", Command: "x"}, "slug"},
			{api.MCPServerRequest{Slug: "gh_", Transport: "stdio", Command: "x"}, "slug"}, // gh_'s x and gh's _x: mcp__gh___x both
			{api.MCPServerRequest{Slug: "ws", Transport: "websocket", URL: "ws://x"}, "transport"},
			{api.MCPServerRequest{Slug: "h", Transport: "http"}, "url"},
			{api.MCPServerRequest{Slug: "h", Transport: "http", URL: "https://x", Env: map[string]string{"A": "b"}}, "command"},
		} {
			if ae := e.wantError(http.StatusUnprocessableEntity, "POST", api.MCPServersPath, tc.req); ae.Field != tc.field {
				t.Errorf("%+v: field %q (%s), want %q", tc.req, ae.Field, ae.Error, tc.field)
			}
		}
		e.wantError(http.StatusConflict, "POST", api.MCPServersPath, api.MCPServerRequest{Slug: "gh", Transport: "stdio", Command: "x"})
		// Another user's server may be read but not changed.
		if _, err := e.st.CreateMCPServer(t.Context(), store.MCPServerRecord{Slug: "a11ce000-0001", Owner: "alice", Transport: store.MCPStdio, Command: "x"}); err != nil {
			t.Fatal(err)
		}
		e.must(http.StatusOK, "GET", api.MCPServersPath+"/a11ce000-0001", nil, &m)
		e.wantError(http.StatusForbidden, "PUT", api.MCPServersPath+"/a11ce000-0001", api.MCPServerRequest{Transport: "stdio", Command: "y"})
		if ae := e.wantError(http.StatusForbidden, "DELETE", api.MCPServersPath+"/a11ce000-0001", nil); !strings.Contains(ae.Error, "alice") {
			t.Fatalf("delete another's server: %+v", ae)
		}
		e.must(http.StatusNoContent, "DELETE", api.MCPServersPath+"/gh", nil, nil)
		e.wantError(http.StatusNotFound, "GET", api.MCPServersPath+"/gh", nil)
	})

	t.Run("no key", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, sqliteStore(t), nil)
		ae := e.wantError(http.StatusUnprocessableEntity, "POST", api.MCPServersPath, api.MCPServerRequest{Slug: "h", Transport: "http",
			URL: "https://mcp.example/mcp", Headers: map[string]string{"Authorization": "Bearer t"}})
		if ae.Field != "headers.Authorization" || !strings.Contains(ae.Error, secrets.EnvKey) {
			t.Fatalf("a secret without a key: %+v", ae)
		}
		if _, err := e.st.GetMCPServer(t.Context(), "h"); err == nil {
			t.Fatal("the refused server was stored")
		}
		e.must(http.StatusCreated, "POST", api.MCPServersPath, api.MCPServerRequest{Slug: "h", Transport: "http", URL: "https://mcp.example/mcp"}, nil)
	})
}

// TestSSHConnectionsAPI: the key is sealed and never answered, the host
// key is required and parsed, grants are listed and revoked, and a
// connection of another user is invisible unless granted, and then
// usable but not changeable.
func TestSSHConnectionsAPI(t *testing.T) {
	t.Parallel()
	box := secretstest.Box(t, 3)
	priv, hostKey := sshKeys(t)
	onEachBackendWith(t, func(c *server.Config) { c.Secrets = box }, func(t *testing.T, e *env) {
		var c api.SSHConnection
		e.must(http.StatusCreated, "POST", api.SSHConnectionsPath, api.SSHConnectionRequest{ID: "0b5e1d2c-0001", Host: "10.0.0.5", User: "ops",
			HostKey: hostKey, PrivateKey: priv}, &c)
		if c.ID != "0b5e1d2c-0001" || c.Auth != store.SSHAuthKey || !c.HasSecret || c.Secret != api.Redacted || c.Owner != "local" || c.HostKey != hostKey {
			t.Fatalf("created %+v", c)
		}
		rec, err := e.st.GetSSHConnection(t.Context(), "0b5e1d2c-0001")
		if err != nil {
			t.Fatal(err)
		}
		if v, err := box.OpenString(rec.Secret, store.SSHSecretPurpose("0b5e1d2c-0001", store.SSHAuthKey)); err != nil || v != priv {
			t.Fatalf("stored key opens to %d bytes, %v", len(v), err)
		}
		_, body := e.do("GET", api.SSHConnectionsPath+"/0b5e1d2c-0001", nil)
		if strings.Contains(string(body), "PRIVATE KEY") || strings.Contains(string(body), rec.Secret) {
			t.Fatalf("the answer leaks the key: %s", body)
		}
		// A PUT without a secret keeps it.
		e.must(http.StatusOK, "PUT", api.SSHConnectionsPath+"/0b5e1d2c-0001", api.SSHConnectionRequest{Host: "10.0.0.6", User: "ops", HostKey: hostKey}, &c)
		if again, _ := e.st.GetSSHConnection(t.Context(), "0b5e1d2c-0001"); again.Secret != rec.Secret || again.Host != "10.0.0.6" {
			t.Fatalf("after PUT: %+v", again)
		}

		for _, tc := range []struct {
			req   api.SSHConnectionRequest
			field string
		}{
			{api.SSHConnectionRequest{ID: "cafe0000-0001", Host: "h", User: "u", PrivateKey: priv}, "host_key"},
			{api.SSHConnectionRequest{ID: "cafe0000-0001", Host: "h", User: "u", HostKey: "not a key", PrivateKey: priv}, "host_key"},
			{api.SSHConnectionRequest{ID: "cafe0000-0001", Host: "h", User: "u", HostKey: hostKey}, "private_key"},
			{api.SSHConnectionRequest{ID: "cafe0000-0001", Host: "h", User: "u", HostKey: hostKey, PrivateKey: "garbage"}, "private_key"},
			{api.SSHConnectionRequest{ID: "cafe0000-0001", Host: "h", User: "u", HostKey: hostKey, PrivateKey: priv, Password: "p"}, "password"},
			{api.SSHConnectionRequest{ID: "../x", Host: "h", User: "u", HostKey: hostKey, Password: "p"}, "id"},
			{api.SSHConnectionRequest{ID: "cafe0000-0001", User: "u", HostKey: hostKey, Password: "p"}, "host"},
			{api.SSHConnectionRequest{ID: "cafe0000-0001", Host: "h", User: "u", Port: 99999, HostKey: hostKey, Password: "p"}, "port"},
		} {
			if ae := e.wantError(http.StatusUnprocessableEntity, "POST", api.SSHConnectionsPath, tc.req); ae.Field != tc.field {
				t.Errorf("%+v: field %q (%s), want %q", tc.req, ae.Field, ae.Error, tc.field)
			}
		}

		// Without an id the server gives the connection a UUID, which a
		// piece's allowed_ssh_connections can name.
		var gen api.SSHConnection
		e.must(http.StatusCreated, "POST", api.SSHConnectionsPath, api.SSHConnectionRequest{Host: "h", User: "u", HostKey: hostKey, Password: "pw"}, &gen)
		if len(gen.ID) != 36 || gen.Auth != store.SSHAuthPassword {
			t.Fatalf("created without an id: %+v", gen)
		}
		e.must(http.StatusNoContent, "DELETE", api.SSHConnectionsPath+"/"+gen.ID, nil, nil)

		var g store.SSHGrant
		e.must(http.StatusCreated, "POST", api.SSHConnectionsPath+"/0b5e1d2c-0001/grants", api.SSHGrantRequest{GranteeKind: "user", Grantee: "bob"}, &g)
		if g.ConnectionID != "0b5e1d2c-0001" || g.Grantee != "bob" {
			t.Fatalf("grant %+v", g)
		}
		if ae := e.wantError(http.StatusUnprocessableEntity, "POST", api.SSHConnectionsPath+"/0b5e1d2c-0001/grants", api.SSHGrantRequest{GranteeKind: "group", Grantee: "x"}); ae.Field != "grantee_kind" {
			t.Fatalf("bad grant: %+v", ae)
		}
		var gl api.SSHGrantList
		e.must(http.StatusOK, "GET", api.SSHConnectionsPath+"/0b5e1d2c-0001/grants", nil, &gl)
		if len(gl.Grants) != 1 {
			t.Fatalf("grants %+v", gl)
		}
		e.must(http.StatusNoContent, "DELETE", api.SSHConnectionsPath+"/0b5e1d2c-0001/grants/user/bob", nil, nil)
		e.wantError(http.StatusNotFound, "DELETE", api.SSHConnectionsPath+"/0b5e1d2c-0001/grants/user/bob", nil)

		// Alice's connection: invisible to this caller ("local") until
		// granted, then readable but not changeable.
		sealed, _ := box.SealString("pw", store.SSHSecretPurpose("a11ce000-0001", store.SSHAuthPassword))
		if _, err := e.st.CreateSSHConnection(t.Context(), store.SSHConnectionRecord{ID: "a11ce000-0001", Owner: "alice", Host: "h", User: "u",
			HostKey: hostKey, Auth: store.SSHAuthPassword, Secret: sealed}); err != nil {
			t.Fatal(err)
		}
		var list api.SSHConnectionList
		e.must(http.StatusOK, "GET", api.SSHConnectionsPath, nil, &list)
		if len(list.Connections) != 1 || list.Connections[0].ID != "0b5e1d2c-0001" {
			t.Fatalf("list before the grant: %+v", list)
		}
		e.wantError(http.StatusNotFound, "GET", api.SSHConnectionsPath+"/a11ce000-0001", nil)
		if _, err := e.st.GrantSSHConnection(t.Context(), store.SSHGrant{ConnectionID: "a11ce000-0001", GranteeKind: "user", Grantee: "local"}); err != nil {
			t.Fatal(err)
		}
		e.must(http.StatusOK, "GET", api.SSHConnectionsPath+"/a11ce000-0001", nil, &c)
		e.wantError(http.StatusForbidden, "DELETE", api.SSHConnectionsPath+"/a11ce000-0001", nil)
		e.wantError(http.StatusForbidden, "POST", api.SSHConnectionsPath+"/a11ce000-0001/grants", api.SSHGrantRequest{GranteeKind: "user", Grantee: "eve"})

		e.must(http.StatusNoContent, "DELETE", api.SSHConnectionsPath+"/0b5e1d2c-0001", nil, nil)
		e.wantError(http.StatusNotFound, "GET", api.SSHConnectionsPath+"/0b5e1d2c-0001", nil)
	})
}

// TestSkillsAPI: a skill is named by its SKILL.md, listed with its file
// names, read with its files, and deleted; a malformed SKILL.md or path
// is refused naming the field.
func TestSkillsAPI(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, e *env) {
		md := "---\nname: pdf\ndescription: Fill PDF forms\n---\nRun fill.py.\n"
		var sk api.SkillResponse
		e.must(http.StatusCreated, "POST", api.SkillsPath, api.SkillRequest{Files: map[string]string{"SKILL.md": md, "fill.py": "print(1)\n"}}, &sk)
		if sk.Skill.Name != "pdf" || sk.Skill.Description != "Fill PDF forms" || sk.Skill.Owner != "local" || sk.Skill.Files["fill.py"] != "print(1)\n" {
			t.Fatalf("created %+v", sk)
		}
		var list api.SkillList
		e.must(http.StatusOK, "GET", api.SkillsPath, nil, &list)
		if len(list.Skills) != 1 || strings.Join(list.Skills[0].Files, ",") != "SKILL.md,fill.py" {
			t.Fatalf("list %+v", list)
		}
		e.must(http.StatusOK, "GET", api.SkillsPath+"/pdf", nil, &sk)
		e.wantError(http.StatusConflict, "POST", api.SkillsPath, api.SkillRequest{Files: map[string]string{"SKILL.md": md}})
		for _, tc := range []struct {
			files map[string]string
			field string
		}{
			{map[string]string{"README.md": "x"}, "files"},
			{map[string]string{"SKILL.md": "# no front matter"}, "files.SKILL.md"},
			{map[string]string{"SKILL.md": strings.Replace(md, "pdf", "other", 1), "../escape": "x"}, "files.../escape"},
		} {
			if ae := e.wantError(http.StatusUnprocessableEntity, "POST", api.SkillsPath, api.SkillRequest{Files: tc.files}); ae.Field != tc.field {
				t.Errorf("%v: field %q (%s), want %q", tc.files, ae.Field, ae.Error, tc.field)
			}
		}
		e.must(http.StatusNoContent, "DELETE", api.SkillsPath+"/pdf", nil, nil)
		e.wantError(http.StatusNotFound, "GET", api.SkillsPath+"/pdf", nil)
	})
}

// onEachBackendWith is onEachBackend with a server configuration.
func onEachBackendWith(t *testing.T, mod func(*server.Config), test func(t *testing.T, e *env)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, newEnv(t, b.open(t), mod))
		})
	}
}
