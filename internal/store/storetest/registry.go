package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/secrets"
	"github.com/maestro-run/maestro/internal/store"
)

// seal seals v under a fixed test key.
func seal(t *testing.T, v string) string {
	t.Helper()
	box, err := secrets.New(bytes.Repeat([]byte{9}, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	s, err := box.SealString(v, "storetest")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testMCPServers(t *testing.T, b *bundle) {
	token := seal(t, "ghp_secret")
	in := store.MCPServerRecord{Slug: "github", Owner: "token:ab12", Transport: store.MCPHTTP,
		URL: "https://mcp.example/mcp", Headers: map[string]string{"Authorization": token}, Timeout: 30}
	got, err := b.s.CreateMCPServer(b.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	now := b.clock.Now()
	want := in
	want.CreatedAt, want.UpdatedAt = now, now
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CreateMCPServer (-want +got):\n%s", diff)
	}
	_, err = b.s.CreateMCPServer(b.ctx, in)
	wantErr(t, "CreateMCPServer with a taken slug", err, store.ErrConflict)

	b.clock.Advance(time.Minute)
	upd := store.MCPServerRecord{Slug: "github", Owner: "someone-else", Transport: store.MCPStdio,
		Command: "npx", Args: []string{"-y", "server"}, Env: map[string]string{"TOKEN": token}}
	got, err = b.s.UpdateMCPServer(b.ctx, upd)
	if err != nil {
		t.Fatal(err)
	}
	want = upd
	want.Owner, want.CreatedAt, want.UpdatedAt = "token:ab12", now, b.clock.Now()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("UpdateMCPServer keeps the owner and creation time (-want +got):\n%s", diff)
	}
	if g, err := b.s.GetMCPServer(b.ctx, "github"); err != nil || !cmp.Equal(g, want) {
		t.Errorf("GetMCPServer = %+v, %v; want %+v", g, err, want)
	}
	_, err = b.s.UpdateMCPServer(b.ctx, store.MCPServerRecord{Slug: "missing", Transport: store.MCPStdio, Command: "x"})
	wantErr(t, "UpdateMCPServer of an unknown server", err, store.ErrNotFound)

	if _, err := b.s.CreateMCPServer(b.ctx, store.MCPServerRecord{Slug: "files", Transport: store.MCPStdio, Command: "fs"}); err != nil {
		t.Fatal(err)
	}
	list, err := b.s.ListMCPServers(b.ctx)
	if err != nil || len(list) != 2 || list[0].Slug != "files" || list[1].Slug != "github" {
		t.Fatalf("ListMCPServers = %+v, %v; want files and github by slug", list, err)
	}
	if err := b.s.DeleteMCPServer(b.ctx, "github"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "DeleteMCPServer twice", b.s.DeleteMCPServer(b.ctx, "github"), store.ErrNotFound)
	_, err = b.s.GetMCPServer(b.ctx, "github")
	wantErr(t, "GetMCPServer after delete", err, store.ErrNotFound)
}

func testSSHConnections(t *testing.T, b *bundle) {
	in := store.SSHConnectionRecord{ID: "5e1d2c3b-0001", Owner: "alice", Host: "db.internal", Port: 2222, User: "ops",
		HostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample", Auth: store.SSHAuthPassword, Secret: seal(t, "pw")}
	got, err := b.s.CreateSSHConnection(b.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.CreatedAt, want.UpdatedAt = b.clock.Now(), b.clock.Now()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CreateSSHConnection (-want +got):\n%s", diff)
	}
	_, err = b.s.CreateSSHConnection(b.ctx, in)
	wantErr(t, "CreateSSHConnection with a taken id", err, store.ErrConflict)
	in.Port = 22
	if got, err = b.s.UpdateSSHConnection(b.ctx, in); err != nil || got.Port != 22 {
		t.Fatalf("UpdateSSHConnection = %+v, %v", got, err)
	}

	g1 := store.SSHGrant{ConnectionID: "5e1d2c3b-0001", GranteeKind: store.GranteeUser, Grantee: "bob"}
	g2 := store.SSHGrant{ConnectionID: "5e1d2c3b-0001", GranteeKind: store.GranteeTeam, Grantee: "sre"}
	for _, g := range []store.SSHGrant{g1, g2, g1} { // granting twice is harmless
		if got, err := b.s.GrantSSHConnection(b.ctx, g); err != nil || got.Grantee != g.Grantee || got.CreatedAt.IsZero() {
			t.Fatalf("GrantSSHConnection(%+v) = %+v, %v", g, got, err)
		}
	}
	_, err = b.s.GrantSSHConnection(b.ctx, store.SSHGrant{ConnectionID: "deadbeef-0000", GranteeKind: store.GranteeUser, Grantee: "bob"})
	wantErr(t, "GrantSSHConnection of an unknown connection", err, store.ErrNotFound)
	grants, err := b.s.ListSSHGrants(b.ctx, "5e1d2c3b-0001")
	if err != nil || len(grants) != 2 || grants[0].GranteeKind != store.GranteeTeam || grants[1].Grantee != "bob" {
		t.Fatalf("ListSSHGrants = %+v, %v; want the team then the user grant", grants, err)
	}
	if err := b.s.RevokeSSHConnection(b.ctx, g2); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "RevokeSSHConnection twice", b.s.RevokeSSHConnection(b.ctx, g2), store.ErrNotFound)

	if err := b.s.DeleteSSHConnection(b.ctx, "5e1d2c3b-0001"); err != nil {
		t.Fatal(err)
	}
	if grants, err := b.s.ListSSHGrants(b.ctx, ""); err != nil || len(grants) != 0 {
		t.Fatalf("grants after the connection was deleted = %+v, %v; want none", grants, err)
	}
	if list, err := b.s.ListSSHConnections(b.ctx); err != nil || len(list) != 0 {
		t.Fatalf("ListSSHConnections = %+v, %v; want none", list, err)
	}
}

func testSkills(t *testing.T, b *bundle) {
	in := store.Skill{Name: "pdf", Description: "Fill PDF forms", Owner: "alice",
		Files: map[string]string{"SKILL.md": "---\nname: pdf\n---\n", "scripts/fill.py": "print(1)\n"}}
	got, err := b.s.CreateSkill(b.ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.CreatedAt, want.UpdatedAt = b.clock.Now(), b.clock.Now()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CreateSkill (-want +got):\n%s", diff)
	}
	_, err = b.s.CreateSkill(b.ctx, in)
	wantErr(t, "CreateSkill with a taken name", err, store.ErrConflict)
	if g, err := b.s.GetSkill(b.ctx, "pdf"); err != nil || !cmp.Equal(g, want) {
		t.Errorf("GetSkill = %+v, %v", g, err)
	}
	if list, err := b.s.ListSkills(b.ctx); err != nil || len(list) != 1 {
		t.Fatalf("ListSkills = %+v, %v", list, err)
	}
	if err := b.s.DeleteSkill(b.ctx, "pdf"); err != nil {
		t.Fatal(err)
	}
	_, err = b.s.GetSkill(b.ctx, "pdf")
	wantErr(t, "GetSkill after delete", err, store.ErrNotFound)
}

func testRegistryBadInput(t *testing.T, b *bundle) {
	sealed := seal(t, "x")
	mcp := func(f func(*store.MCPServerRecord)) store.MCPServerRecord {
		s := store.MCPServerRecord{Slug: "gh", Transport: store.MCPStdio, Command: "gh-mcp"}
		f(&s)
		return s
	}
	ssh := func(f func(*store.SSHConnectionRecord)) store.SSHConnectionRecord {
		c := store.SSHConnectionRecord{ID: "c0ffee00-0001", Host: "h", User: "u", HostKey: "ssh-ed25519 AAAA", Auth: store.SSHAuthKey, Secret: sealed}
		f(&c)
		return c
	}
	skill := func(f func(*store.Skill)) store.Skill {
		s := store.Skill{Name: "pdf", Description: "d", Files: map[string]string{"SKILL.md": "x"}}
		f(&s)
		return s
	}
	tests := []struct {
		name, field string
		call        func() error
	}{
		{"slug with __", "slug", func() error {
			_, err := b.s.CreateMCPServer(b.ctx, mcp(func(s *store.MCPServerRecord) { s.Slug = "a__b" }))
			return err
		}},
		{"unknown transport", "transport", func() error {
			_, err := b.s.CreateMCPServer(b.ctx, mcp(func(s *store.MCPServerRecord) { s.Transport = "ws" }))
			return err
		}},
		{"clear env value", "env.TOKEN", func() error {
			_, err := b.s.CreateMCPServer(b.ctx, mcp(func(s *store.MCPServerRecord) { s.Env = map[string]string{"TOKEN": "clear"} }))
			return err
		}},
		{"clear header value", "headers.Authorization", func() error {
			_, err := b.s.CreateMCPServer(b.ctx, mcp(func(s *store.MCPServerRecord) {
				s.Transport, s.Command, s.URL = store.MCPHTTP, "", "https://x"
				s.Headers = map[string]string{"Authorization": "Bearer clear"}
			}))
			return err
		}},
		{"http without url", "url", func() error {
			_, err := b.s.CreateMCPServer(b.ctx, mcp(func(s *store.MCPServerRecord) { s.Transport, s.Command = store.MCPHTTP, "" }))
			return err
		}},
		{"ssh id", "id", func() error {
			_, err := b.s.CreateSSHConnection(b.ctx, ssh(func(c *store.SSHConnectionRecord) { c.ID = "../x" }))
			return err
		}},
		{"ssh without host key", "host_key", func() error {
			_, err := b.s.CreateSSHConnection(b.ctx, ssh(func(c *store.SSHConnectionRecord) { c.HostKey = "" }))
			return err
		}},
		{"ssh clear password", "secret.password", func() error {
			_, err := b.s.CreateSSHConnection(b.ctx, ssh(func(c *store.SSHConnectionRecord) { c.Auth, c.Secret = store.SSHAuthPassword, "pw" }))
			return err
		}},
		{"ssh port", "port", func() error {
			_, err := b.s.CreateSSHConnection(b.ctx, ssh(func(c *store.SSHConnectionRecord) { c.Port = 70000 }))
			return err
		}},
		{"grantee kind", "grantee_kind", func() error {
			_, err := b.s.GrantSSHConnection(b.ctx, store.SSHGrant{ConnectionID: "c0ffee00-0001", GranteeKind: "group", Grantee: "x"})
			return err
		}},
		{"skill without SKILL.md", "files", func() error {
			_, err := b.s.CreateSkill(b.ctx, skill(func(s *store.Skill) { s.Files = map[string]string{"README.md": "x"} }))
			return err
		}},
		{"skill path escaping", "files.../x", func() error {
			_, err := b.s.CreateSkill(b.ctx, skill(func(s *store.Skill) { s.Files["../x"] = "x" }))
			return err
		}},
		{"skill absolute path", "files./etc/passwd", func() error {
			_, err := b.s.CreateSkill(b.ctx, skill(func(s *store.Skill) { s.Files["/etc/passwd"] = "x" }))
			return err
		}},
		{"skill name", "name", func() error {
			_, err := b.s.CreateSkill(b.ctx, skill(func(s *store.Skill) { s.Name = "PDF Tools" }))
			return err
		}},
	}
	for _, tc := range tests {
		wantField(t, tc.name, tc.call(), tc.field)
	}
	for _, list := range []func() (int, error){
		func() (int, error) { l, err := b.s.ListMCPServers(b.ctx); return len(l), err },
		func() (int, error) { l, err := b.s.ListSSHConnections(b.ctx); return len(l), err },
		func() (int, error) { l, err := b.s.ListSkills(b.ctx); return len(l), err },
	} {
		if n, err := list(); err != nil || n != 0 {
			t.Fatalf("a rejected input was stored: %d records, %v", n, err)
		}
	}
}
