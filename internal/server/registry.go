package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/secrets"
	"github.com/maestro-run/maestro/internal/skills"
	"github.com/maestro-run/maestro/internal/store"
)

// The registry routes: MCP servers, SSH connections and their grants,
// skills (docs/api.md). Secrets are sealed with Config.Secrets before they
// reach the store and never answered.

func (s *Server) registerRegistry() {
	s.handle("GET "+api.MCPServersPath, s.listMCPServers)
	s.handle("POST "+api.MCPServersPath, s.createMCPServer)
	s.handle("GET "+api.MCPServersPath+"/{slug}", s.getMCPServer)
	s.handle("PUT "+api.MCPServersPath+"/{slug}", s.putMCPServer)
	s.handle("DELETE "+api.MCPServersPath+"/{slug}", s.deleteMCPServer)

	s.handle("GET "+api.SSHConnectionsPath, s.listSSHConnections)
	s.handle("POST "+api.SSHConnectionsPath, s.createSSHConnection)
	s.handle("GET "+api.SSHConnectionsPath+"/{id}", s.getSSHConnection)
	s.handle("PUT "+api.SSHConnectionsPath+"/{id}", s.putSSHConnection)
	s.handle("DELETE "+api.SSHConnectionsPath+"/{id}", s.deleteSSHConnection)
	s.handle("GET "+api.SSHConnectionsPath+"/{id}/grants", s.listSSHGrants)
	s.handle("POST "+api.SSHConnectionsPath+"/{id}/grants", s.grantSSHConnection)
	s.handle("DELETE "+api.SSHConnectionsPath+"/{id}/grants/{kind}/{grantee}", s.revokeSSHConnection)

	s.handle("GET "+api.SkillsPath, s.listSkills)
	s.handle("POST "+api.SkillsPath, s.createSkill)
	s.handle("GET "+api.SkillsPath+"/{name}", s.getSkill)
	s.handle("DELETE "+api.SkillsPath+"/{name}", s.deleteSkill)
}

// seal seals a secret for field, or answers 422 naming the field (no key
// configured) and returns false.
func (s *Server) seal(w http.ResponseWriter, field, value, purpose string) (string, bool) {
	sealed, err := s.cfg.Secrets.SealString(value, purpose)
	if errors.Is(err, secrets.ErrNoKey) {
		writeFieldError(w, http.StatusUnprocessableEntity, field, "cannot store a secret: this server has no encryption key; start it with "+
			secrets.EnvKey+" set to 32 random bytes, base64 or hex (e.g. `openssl rand -base64 32`)")
		return "", false
	}
	if err != nil {
		s.log.Error("seal a secret", "field", field, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error: cannot seal the secret")
		return "", false
	}
	return sealed, true
}

// ownedBy answers 403 unless the caller owns a record, and reports
// whether it does.
func ownedBy(w http.ResponseWriter, r *http.Request, what, name, owner string) bool {
	if owner != actor(r) {
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s %q belongs to %s; only its owner may change it", what, name, owner))
		return false
	}
	return true
}

// withValues maps each name of m to v (nil for an empty m): a secret map
// answered as "***", or a placeholder to validate a shape with.
func withValues(m map[string]string, v string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = v
	}
	return out
}

func mcpAnswer(m store.MCPServerRecord) api.MCPServer {
	m.Env, m.Headers = withValues(m.Env, api.Redacted), withValues(m.Headers, api.Redacted)
	return api.MCPServer(m)
}

// sealValues seals the values of an env or headers map; "***" keeps the
// value stored under that name in old (a 422 when there is none).
func (s *Server) sealValues(w http.ResponseWriter, slug, field string, in, old map[string]string) (map[string]string, bool) {
	if len(in) == 0 {
		return nil, true
	}
	out := make(map[string]string, len(in))
	for _, k := range slices.Sorted(maps.Keys(in)) {
		f := field + "." + k
		if in[k] == api.Redacted {
			prev, ok := old[k]
			if !ok {
				writeFieldError(w, http.StatusUnprocessableEntity, f, `"***" keeps a stored value, but none is stored under this name; send the value`)
				return nil, false
			}
			out[k] = prev
			continue
		}
		v, ok := s.seal(w, f, in[k], store.MCPSecretPurpose(slug, field, k))
		if !ok {
			return nil, false
		}
		out[k] = v
	}
	return out, true
}

// mcpInput turns a request into a record for slug (old is the stored one
// on a PUT), sealing its secrets.
func (s *Server) mcpInput(w http.ResponseWriter, r *http.Request, req api.MCPServerRequest, slug string, old store.MCPServerRecord) (store.MCPServerRecord, bool) {
	rec := store.MCPServerRecord{Slug: slug, Owner: actor(r), Transport: req.Transport, Command: req.Command, Args: req.Args,
		URL: req.URL, Timeout: req.Timeout}
	// Check the shape before sealing, so that a bad request is named by
	// its own fault rather than by a missing key.
	probe := rec
	probe.Env, probe.Headers = withValues(req.Env, sealedPlaceholder), withValues(req.Headers, sealedPlaceholder)
	if err := probe.Validate(); err != nil {
		s.storeError(w, r, err)
		return rec, false
	}
	var ok bool
	if rec.Env, ok = s.sealValues(w, slug, "env", req.Env, old.Env); !ok {
		return rec, false
	}
	rec.Headers, ok = s.sealValues(w, slug, "headers", req.Headers, old.Headers)
	return rec, ok
}

// sealedPlaceholder is a well-formed sealed-looking value, to validate a
// record's shape before its secrets are sealed.
const sealedPlaceholder = "mse1:00000000:AA"

func (s *Server) listMCPServers(w http.ResponseWriter, r *http.Request) {
	list, err := s.st.ListMCPServers(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	out := make([]api.MCPServer, 0, len(list))
	for _, m := range list {
		out = append(out, mcpAnswer(m))
	}
	writeJSON(w, http.StatusOK, api.MCPServerList{Servers: out})
}

func (s *Server) createMCPServer(w http.ResponseWriter, r *http.Request) {
	var req api.MCPServerRequest
	if !decodeJSON(w, r, &req, false) {
		return
	}
	rec, ok := s.mcpInput(w, r, req, req.Slug, store.MCPServerRecord{})
	if !ok {
		return
	}
	m, err := s.st.CreateMCPServer(r.Context(), rec)
	if nameTaken(w, err, "slug", fmt.Sprintf("an MCP server %q exists already; replace it with PUT %s/%s", rec.Slug, api.MCPServersPath, rec.Slug)) {
		return
	}
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, api.ActionMCPServerCreate, "mcp_server:"+m.Slug, nil)
	w.Header().Set("Location", api.MCPServersPath+"/"+m.Slug)
	writeJSON(w, http.StatusCreated, mcpAnswer(m))
}

func (s *Server) getMCPServer(w http.ResponseWriter, r *http.Request) {
	m, err := s.st.GetMCPServer(r.Context(), r.PathValue("slug"))
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, mcpAnswer(m))
}

func (s *Server) putMCPServer(w http.ResponseWriter, r *http.Request) {
	slug := r.PathValue("slug")
	old, err := s.st.GetMCPServer(r.Context(), slug)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if !ownedBy(w, r, "MCP server", slug, old.Owner) {
		return
	}
	var req api.MCPServerRequest
	if !decodeJSON(w, r, &req, false) {
		return
	}
	if req.Slug != "" && req.Slug != slug {
		writeFieldError(w, http.StatusUnprocessableEntity, "slug", fmt.Sprintf("the body names %q but the path %q; a slug cannot change (delete and create)", req.Slug, slug))
		return
	}
	rec, ok := s.mcpInput(w, r, req, slug, old)
	if !ok {
		return
	}
	m, err := s.st.UpdateMCPServer(r.Context(), rec)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, api.ActionMCPServerUpdate, "mcp_server:"+slug, nil)
	writeJSON(w, http.StatusOK, mcpAnswer(m))
}

func (s *Server) deleteMCPServer(w http.ResponseWriter, r *http.Request) {
	s.deleteOwned(w, r, "MCP server", r.PathValue("slug"), api.ActionMCPServerDelete, "mcp_server:",
		func(ctx context.Context, slug string) (string, error) {
			m, err := s.st.GetMCPServer(ctx, slug)
			return m.Owner, err
		}, s.st.DeleteMCPServer)
}

// deleteOwned deletes the record name (owner reads its owner) when the
// caller owns it, audits action on targetPrefix+name and answers 204.
func (s *Server) deleteOwned(w http.ResponseWriter, r *http.Request, what, name, action, targetPrefix string,
	owner func(context.Context, string) (string, error), del func(context.Context, string) error) {
	o, err := owner(r.Context(), name)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	if !ownedBy(w, r, what, name, o) {
		return
	}
	if err := del(r.Context(), name); err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, action, targetPrefix+name, nil)
	w.WriteHeader(http.StatusNoContent)
}

// ---- SSH connections

func sshAnswer(c store.SSHConnectionRecord, grants []store.SSHGrant) api.SSHConnection {
	has := c.Secret != ""
	c.Secret = api.Redacted
	return api.SSHConnection{SSHConnectionRecord: c, HasSecret: has, Grants: nonNil(grants)}
}

// sshInput checks a request and seals its secret for id (old is the
// stored connection on a PUT: without a new secret its own is kept).
func (s *Server) sshInput(w http.ResponseWriter, r *http.Request, req api.SSHConnectionRequest, id string, old *store.SSHConnectionRecord) (store.SSHConnectionRecord, bool) {
	rec := store.SSHConnectionRecord{ID: id, Owner: actor(r), Host: req.Host, Port: req.Port, User: req.User, HostKey: strings.TrimSpace(req.HostKey)}
	if err := store.ValidateSSHConnectionID(id); err != nil {
		s.storeError(w, r, err)
		return rec, false
	}
	if rec.HostKey == "" {
		writeFieldError(w, http.StatusUnprocessableEntity, "host_key", `required: the server's public key ("ssh-ed25519 AAAA…", e.g. from ssh-keyscan); Maestro never trusts a host key on first use`)
		return rec, false
	}
	if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(rec.HostKey)); err != nil {
		writeFieldError(w, http.StatusUnprocessableEntity, "host_key", "expected a public key as in known_hosts or authorized_keys (\"ssh-ed25519 AAAA…\"): "+err.Error())
		return rec, false
	}
	var secret string
	switch {
	case req.PrivateKey != "" && req.Password != "":
		writeFieldError(w, http.StatusUnprocessableEntity, "password", "send private_key or password, not both")
		return rec, false
	case req.PrivateKey != "":
		if _, err := ssh.ParsePrivateKey([]byte(req.PrivateKey)); err != nil {
			writeFieldError(w, http.StatusUnprocessableEntity, "private_key", "expected an unencrypted private key (OpenSSH or PEM): "+err.Error())
			return rec, false
		}
		rec.Auth, secret = store.SSHAuthKey, req.PrivateKey
	case req.Password != "":
		rec.Auth, secret = store.SSHAuthPassword, req.Password
	case old != nil:
		rec.Auth, rec.Secret = old.Auth, old.Secret
	default:
		writeFieldError(w, http.StatusUnprocessableEntity, "private_key", "required: a private key or a password to log in with")
		return rec, false
	}
	probe := rec
	if secret != "" {
		probe.Secret = "mse1:00000000:AA"
	}
	if err := probe.Validate(); err != nil {
		s.storeError(w, r, err)
		return rec, false
	}
	if secret != "" {
		field := map[string]string{store.SSHAuthKey: "private_key", store.SSHAuthPassword: "password"}[rec.Auth]
		var ok bool
		if rec.Secret, ok = s.seal(w, field, secret, store.SSHSecretPurpose(id, rec.Auth)); !ok {
			return rec, false
		}
	}
	return rec, true
}

func (s *Server) listSSHConnections(w http.ResponseWriter, r *http.Request) {
	conns, err := s.st.ListSSHConnections(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	grants, err := s.st.ListSSHGrants(r.Context(), "")
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	out := []api.SSHConnection{}
	for _, c := range conns {
		if !store.MayUseSSH(c, grants, actor(r)) {
			continue
		}
		var own []store.SSHGrant
		for _, g := range grants {
			if g.ConnectionID == c.ID {
				own = append(own, g)
			}
		}
		out = append(out, sshAnswer(c, own))
	}
	writeJSON(w, http.StatusOK, api.SSHConnectionList{Connections: out})
}

// sshConnection reads the connection of the path, answering 404 when it
// does not exist or the caller may not use it, and 403 when owner is set
// and the caller is not its owner.
func (s *Server) sshConnection(w http.ResponseWriter, r *http.Request, owner bool) (store.SSHConnectionRecord, []store.SSHGrant, bool) {
	id := r.PathValue("id")
	c, err := s.st.GetSSHConnection(r.Context(), id)
	if err != nil {
		s.storeError(w, r, err)
		return c, nil, false
	}
	grants, err := s.st.ListSSHGrants(r.Context(), id)
	if err != nil {
		s.storeError(w, r, err)
		return c, nil, false
	}
	if !store.MayUseSSH(c, grants, actor(r)) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("get SSH connection %q: %v", id, store.ErrNotFound))
		return c, nil, false
	}
	if owner && !ownedBy(w, r, "SSH connection", id, c.Owner) {
		return c, nil, false
	}
	return c, grants, true
}

func (s *Server) createSSHConnection(w http.ResponseWriter, r *http.Request) {
	var req api.SSHConnectionRequest
	if !decodeJSON(w, r, &req, false) {
		return
	}
	id := req.ID
	if id == "" {
		id = newConnectionID()
	}
	rec, ok := s.sshInput(w, r, req, id, nil)
	if !ok {
		return
	}
	c, err := s.st.CreateSSHConnection(r.Context(), rec)
	if nameTaken(w, err, "id", fmt.Sprintf("an SSH connection %q exists already; replace it with PUT %s/%s, or leave id out for a new one", id, api.SSHConnectionsPath, id)) {
		return
	}
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, api.ActionSSHConnectionCreate, "ssh_connection:"+c.ID, nil)
	w.Header().Set("Location", api.SSHConnectionsPath+"/"+c.ID)
	writeJSON(w, http.StatusCreated, sshAnswer(c, nil))
}

func (s *Server) getSSHConnection(w http.ResponseWriter, r *http.Request) {
	if c, grants, ok := s.sshConnection(w, r, false); ok {
		writeJSON(w, http.StatusOK, sshAnswer(c, grants))
	}
}

func (s *Server) putSSHConnection(w http.ResponseWriter, r *http.Request) {
	old, grants, ok := s.sshConnection(w, r, true)
	if !ok {
		return
	}
	var req api.SSHConnectionRequest
	if !decodeJSON(w, r, &req, false) {
		return
	}
	if req.ID != "" && req.ID != old.ID {
		writeFieldError(w, http.StatusUnprocessableEntity, "id", fmt.Sprintf("the body names %q but the path %q; an id cannot change (delete and create)", req.ID, old.ID))
		return
	}
	rec, ok := s.sshInput(w, r, req, old.ID, &old)
	if !ok {
		return
	}
	c, err := s.st.UpdateSSHConnection(r.Context(), rec)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, api.ActionSSHConnectionUpdate, "ssh_connection:"+c.ID, nil)
	writeJSON(w, http.StatusOK, sshAnswer(c, grants))
}

func (s *Server) deleteSSHConnection(w http.ResponseWriter, r *http.Request) {
	c, _, ok := s.sshConnection(w, r, true)
	if !ok {
		return
	}
	if err := s.st.DeleteSSHConnection(r.Context(), c.ID); err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, api.ActionSSHConnectionDelete, "ssh_connection:"+c.ID, nil)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listSSHGrants(w http.ResponseWriter, r *http.Request) {
	if _, grants, ok := s.sshConnection(w, r, false); ok {
		writeJSON(w, http.StatusOK, api.SSHGrantList{Grants: nonNil(grants)})
	}
}

func (s *Server) grantSSHConnection(w http.ResponseWriter, r *http.Request) {
	c, _, ok := s.sshConnection(w, r, true)
	if !ok {
		return
	}
	var req api.SSHGrantRequest
	if !decodeJSON(w, r, &req, false) {
		return
	}
	g, err := s.st.GrantSSHConnection(r.Context(), store.SSHGrant{ConnectionID: c.ID, GranteeKind: req.GranteeKind, Grantee: req.Grantee})
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, api.ActionSSHConnectionGrant, "ssh_connection:"+c.ID, nil)
	writeJSON(w, http.StatusCreated, g)
}

func (s *Server) revokeSSHConnection(w http.ResponseWriter, r *http.Request) {
	c, _, ok := s.sshConnection(w, r, true)
	if !ok {
		return
	}
	g := store.SSHGrant{ConnectionID: c.ID, GranteeKind: r.PathValue("kind"), Grantee: r.PathValue("grantee")}
	if err := s.st.RevokeSSHConnection(r.Context(), g); err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, api.ActionSSHConnectionRevoke, "ssh_connection:"+c.ID, nil)
	w.WriteHeader(http.StatusNoContent)
}

// newConnectionID returns a random (version 4) UUID for a connection
// created without an id.
func newConnectionID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// ---- skills

func (s *Server) listSkills(w http.ResponseWriter, r *http.Request) {
	list, err := s.st.ListSkills(r.Context())
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	out := make([]api.SkillSummary, 0, len(list))
	for _, sk := range list {
		out = append(out, api.SkillSummary{Name: sk.Name, Description: sk.Description, Owner: sk.Owner,
			Files: slices.Sorted(maps.Keys(sk.Files)), CreatedAt: sk.CreatedAt, UpdatedAt: sk.UpdatedAt})
	}
	writeJSON(w, http.StatusOK, api.SkillList{Skills: out})
}

func (s *Server) createSkill(w http.ResponseWriter, r *http.Request) {
	var req api.SkillRequest
	if !decodeJSON(w, r, &req, false) {
		return
	}
	md, ok := req.Files[store.SkillFile]
	if !ok {
		writeFieldError(w, http.StatusUnprocessableEntity, "files", "expected a "+store.SkillFile+" whose front matter names and describes the skill")
		return
	}
	meta, err := skills.ParseMeta([]byte(md))
	if err != nil {
		writeFieldError(w, http.StatusUnprocessableEntity, "files."+store.SkillFile, err.Error())
		return
	}
	sk, err := s.st.CreateSkill(r.Context(), store.Skill{Name: meta.Name, Description: meta.Description, Owner: actor(r), Files: req.Files})
	if nameTaken(w, err, "files."+store.SkillFile, fmt.Sprintf("a skill named %q exists already (the name in %s's front matter); delete it first to replace it", meta.Name, store.SkillFile)) {
		return
	}
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	s.audit(r, api.ActionSkillCreate, "skill:"+sk.Name, nil)
	w.Header().Set("Location", api.SkillsPath+"/"+sk.Name)
	writeJSON(w, http.StatusCreated, api.SkillResponse{Skill: sk})
}

func (s *Server) getSkill(w http.ResponseWriter, r *http.Request) {
	sk, err := s.st.GetSkill(r.Context(), r.PathValue("name"))
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.SkillResponse{Skill: sk})
}

func (s *Server) deleteSkill(w http.ResponseWriter, r *http.Request) {
	s.deleteOwned(w, r, "skill", r.PathValue("name"), api.ActionSkillDelete, "skill:",
		func(ctx context.Context, name string) (string, error) {
			sk, err := s.st.GetSkill(ctx, name)
			return sk.Owner, err
		}, s.st.DeleteSkill)
}
