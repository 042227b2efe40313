package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/maestro-run/maestro/internal/store"
)

// The registry's record tables: each row is a name, an owner and a JSON
// definition (migration 005).
const (
	TableMCPServers     = "mcp_servers"
	TableSSHConnections = "ssh_connections"
	TableSkills         = "skills"
)

// RecordTables lists the record tables.
var RecordTables = [...]string{TableMCPServers, TableSSHConnections, TableSkills}

// Column lists of the registry's queries.
const (
	RecordColumns = "name, owner, spec, created_at, updated_at"
	GrantColumns  = "connection_id, grantee_kind, grantee, created_at"
)

// RecordQueries are one record table's queries; each returns RecordColumns
// but Delete.
type RecordQueries struct {
	Insert string // name, owner, spec, now
	Update string // name, spec, now
	Get    string // name
	List   string // (by name)
	Delete string // name → name
}

// record is one row of a record table.
type record struct {
	name, owner      string
	spec             []byte
	created, updated time.Time
}

func scanRecord(s scanner) (record, error) {
	var r record
	var spec string
	err := s.Scan(&r.name, &r.owner, &spec, tsScan{&r.created}, tsScan{&r.updated})
	r.spec = []byte(spec)
	return r, err
}

// decode returns r's definition as a T with its owner and times set.
func decode[T any](r record, table string, set func(*T, record)) (T, error) {
	var v T
	if err := json.Unmarshal(r.spec, &v); err != nil {
		return v, fmt.Errorf("decode %s %q: %w", table, r.name, err)
	}
	set(&v, r)
	return v, nil
}

// records is the typed access to one record table.
type records[T any] struct {
	db    *DB
	table string
	what  string // "MCP server", for messages
	// key returns a value's name and owner.
	key func(T) (name, owner string)
	set func(*T, record)
}

func (rs records[T]) q() RecordQueries { return rs.db.q.Records[rs.table] }

func (rs records[T]) create(ctx context.Context, v T) (T, error) {
	name, owner := rs.key(v)
	spec, err := json.Marshal(v)
	if err != nil {
		return v, fmt.Errorf("create %s %q: %w", rs.what, name, err)
	}
	var out T
	err = rs.db.inTx(ctx, func(t *txn) error {
		r, err := scanRecord(t.QueryRowContext(ctx, rs.q().Insert, name, owner, string(spec), rs.db.ts(rs.db.Now())))
		if err != nil {
			err = rs.db.classify(err)
			if errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("create %s %q: the name is taken: %w", rs.what, name, err)
			}
			return fmt.Errorf("create %s %q: %w", rs.what, name, err)
		}
		out, err = decode(r, rs.table, rs.set)
		return err
	})
	return out, err
}

func (rs records[T]) update(ctx context.Context, v T) (T, error) {
	name, _ := rs.key(v)
	spec, err := json.Marshal(v)
	if err != nil {
		return v, fmt.Errorf("update %s %q: %w", rs.what, name, err)
	}
	var out T
	err = rs.db.inTx(ctx, func(t *txn) error {
		r, err := scanRecord(t.QueryRowContext(ctx, rs.q().Update, name, string(spec), rs.db.ts(rs.db.Now())))
		if err != nil {
			return getErr(err, "update %s %q", rs.what, name)
		}
		out, err = decode(r, rs.table, rs.set)
		return err
	})
	return out, err
}

func (rs records[T]) get(ctx context.Context, name string) (T, error) {
	r, err := scanRecord(rs.db.r.QueryRowContext(ctx, rs.q().Get, name))
	if err != nil {
		var zero T
		return zero, getErr(err, "get %s %q", rs.what, name)
	}
	return decode(r, rs.table, rs.set)
}

func (rs records[T]) list(ctx context.Context) ([]T, error) {
	rows, err := rs.db.r.QueryContext(ctx, rs.q().List)
	recs, err := scanRows(rows, err, scanRecord)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", rs.table, err)
	}
	out := make([]T, 0, len(recs))
	for _, r := range recs {
		v, err := decode(r, rs.table, rs.set)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (rs records[T]) delete(ctx context.Context, name string) error {
	return rs.db.inTx(ctx, func(t *txn) error {
		var got string
		return getErr(t.QueryRowContext(ctx, rs.q().Delete, name).Scan(&got), "delete %s %q", rs.what, name)
	})
}

func (db *DB) mcpServers() records[store.MCPServerRecord] {
	return records[store.MCPServerRecord]{db: db, table: TableMCPServers, what: "MCP server",
		key: func(s store.MCPServerRecord) (string, string) { return s.Slug, s.Owner },
		set: func(s *store.MCPServerRecord, r record) {
			s.Slug, s.Owner, s.CreatedAt, s.UpdatedAt = r.name, r.owner, r.created, r.updated
		}}
}

func (db *DB) sshConnections() records[store.SSHConnectionRecord] {
	return records[store.SSHConnectionRecord]{db: db, table: TableSSHConnections, what: "SSH connection",
		key: func(c store.SSHConnectionRecord) (string, string) { return c.ID, c.Owner },
		set: func(c *store.SSHConnectionRecord, r record) {
			c.ID, c.Owner, c.CreatedAt, c.UpdatedAt = r.name, r.owner, r.created, r.updated
		}}
}

func (db *DB) skills() records[store.Skill] {
	return records[store.Skill]{db: db, table: TableSkills, what: "skill",
		key: func(s store.Skill) (string, string) { return s.Name, s.Owner },
		set: func(s *store.Skill, r record) {
			s.Name, s.Owner, s.CreatedAt, s.UpdatedAt = r.name, r.owner, r.created, r.updated
		}}
}

// validated returns err wrapped as "what: err" when it is not nil.
func validated(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// CreateMCPServer stores an MCP server (see store.Registry).
func (db *DB) CreateMCPServer(ctx context.Context, s store.MCPServerRecord) (store.MCPServerRecord, error) {
	if err := validated("create MCP server", s.Validate()); err != nil {
		return s, err
	}
	return db.mcpServers().create(ctx, s)
}

// UpdateMCPServer replaces an MCP server (see store.Registry).
func (db *DB) UpdateMCPServer(ctx context.Context, s store.MCPServerRecord) (store.MCPServerRecord, error) {
	if err := validated("update MCP server", s.Validate()); err != nil {
		return s, err
	}
	return db.mcpServers().update(ctx, s)
}

// GetMCPServer returns an MCP server (see store.Registry).
func (db *DB) GetMCPServer(ctx context.Context, slug string) (store.MCPServerRecord, error) {
	return db.mcpServers().get(ctx, slug)
}

// ListMCPServers lists MCP servers by slug (see store.Registry).
func (db *DB) ListMCPServers(ctx context.Context) ([]store.MCPServerRecord, error) {
	return db.mcpServers().list(ctx)
}

// DeleteMCPServer removes an MCP server (see store.Registry).
func (db *DB) DeleteMCPServer(ctx context.Context, slug string) error {
	return db.mcpServers().delete(ctx, slug)
}

// CreateSSHConnection stores an SSH connection (see store.Registry).
func (db *DB) CreateSSHConnection(ctx context.Context, c store.SSHConnectionRecord) (store.SSHConnectionRecord, error) {
	if err := validated("create SSH connection", c.Validate()); err != nil {
		return c, err
	}
	return db.sshConnections().create(ctx, c)
}

// UpdateSSHConnection replaces an SSH connection (see store.Registry).
func (db *DB) UpdateSSHConnection(ctx context.Context, c store.SSHConnectionRecord) (store.SSHConnectionRecord, error) {
	if err := validated("update SSH connection", c.Validate()); err != nil {
		return c, err
	}
	return db.sshConnections().update(ctx, c)
}

// GetSSHConnection returns an SSH connection (see store.Registry).
func (db *DB) GetSSHConnection(ctx context.Context, id string) (store.SSHConnectionRecord, error) {
	return db.sshConnections().get(ctx, id)
}

// ListSSHConnections lists SSH connections by id (see store.Registry).
func (db *DB) ListSSHConnections(ctx context.Context) ([]store.SSHConnectionRecord, error) {
	return db.sshConnections().list(ctx)
}

// DeleteSSHConnection removes an SSH connection and its grants (see
// store.Registry).
func (db *DB) DeleteSSHConnection(ctx context.Context, id string) error {
	return db.sshConnections().delete(ctx, id)
}

func scanGrant(s scanner) (store.SSHGrant, error) {
	var g store.SSHGrant
	err := s.Scan(&g.ConnectionID, &g.GranteeKind, &g.Grantee, tsScan{&g.CreatedAt})
	return g, err
}

// GrantSSHConnection records a grant (see store.Registry).
func (db *DB) GrantSSHConnection(ctx context.Context, g store.SSHGrant) (store.SSHGrant, error) {
	if err := validated("grant SSH connection", g.Validate()); err != nil {
		return g, err
	}
	var out store.SSHGrant
	err := db.inTx(ctx, func(t *txn) error {
		var err error
		out, err = scanGrant(t.QueryRowContext(ctx, db.q.GrantInsert, g.ConnectionID, g.GranteeKind, g.Grantee, db.ts(db.Now())))
		if noRow(err) { // granted already
			out, err = scanGrant(t.QueryRowContext(ctx, db.q.GrantGet, g.ConnectionID, g.GranteeKind, g.Grantee))
		}
		if err != nil {
			return fmt.Errorf("grant SSH connection %q to %s %q: %w", g.ConnectionID, g.GranteeKind, g.Grantee, db.classify(err))
		}
		return nil
	})
	return out, err
}

// RevokeSSHConnection removes a grant (see store.Registry).
func (db *DB) RevokeSSHConnection(ctx context.Context, g store.SSHGrant) error {
	return db.inTx(ctx, func(t *txn) error {
		var got string
		err := t.QueryRowContext(ctx, db.q.GrantDelete, g.ConnectionID, g.GranteeKind, g.Grantee).Scan(&got)
		return getErr(err, "revoke SSH connection %q from %s %q", g.ConnectionID, g.GranteeKind, g.Grantee)
	})
}

// ListSSHGrants lists grants (see store.Registry).
func (db *DB) ListSSHGrants(ctx context.Context, connectionID string) ([]store.SSHGrant, error) {
	rows, err := db.r.QueryContext(ctx, db.q.GrantList, connectionID)
	out, err := scanRows(rows, err, scanGrant)
	if err != nil {
		return nil, fmt.Errorf("list SSH grants: %w", err)
	}
	return out, nil
}

// CreateSkill stores a skill (see store.Registry).
func (db *DB) CreateSkill(ctx context.Context, s store.Skill) (store.Skill, error) {
	if err := validated("create skill", s.Validate()); err != nil {
		return s, err
	}
	return db.skills().create(ctx, s)
}

// GetSkill returns a skill (see store.Registry).
func (db *DB) GetSkill(ctx context.Context, name string) (store.Skill, error) {
	return db.skills().get(ctx, name)
}

// ListSkills lists skills by name (see store.Registry).
func (db *DB) ListSkills(ctx context.Context) ([]store.Skill, error) {
	return db.skills().list(ctx)
}

// DeleteSkill removes a skill (see store.Registry).
func (db *DB) DeleteSkill(ctx context.Context, name string) error {
	return db.skills().delete(ctx, name)
}

// WithRegistry returns q with the registry's queries, which are the same
// SQL on both dialects but for PostgreSQL's parameter types (typed: each
// parameter carries its cast, as pgx needs).
func WithRegistry(q Queries, typed bool) Queries {
	p := func(n int, typ string) string {
		if typed {
			return fmt.Sprintf("$%d::%s", n, typ)
		}
		return fmt.Sprintf("$%d", n)
	}
	name, now := p(1, "text"), p(3, "timestamptz")
	q.Records = map[string]RecordQueries{}
	for _, t := range RecordTables {
		q.Records[t] = RecordQueries{
			Insert: `INSERT INTO ` + t + ` (name, owner, spec, created_at, updated_at) VALUES (` +
				name + `, ` + p(2, "text") + `, ` + p(3, "text") + `, ` + p(4, "timestamptz") + `, ` + p(4, "timestamptz") + `) RETURNING ` + RecordColumns,
			Update: `UPDATE ` + t + ` SET spec = ` + p(2, "text") + `, updated_at = ` + now + ` WHERE name = ` + name + ` RETURNING ` + RecordColumns,
			Get:    `SELECT ` + RecordColumns + ` FROM ` + t + ` WHERE name = ` + name,
			List:   `SELECT ` + RecordColumns + ` FROM ` + t + ` ORDER BY name`,
			Delete: `DELETE FROM ` + t + ` WHERE name = ` + name + ` RETURNING name`,
		}
	}
	grant := `connection_id = ` + name + ` AND grantee_kind = ` + p(2, "text") + ` AND grantee = ` + p(3, "text")
	q.GrantInsert = `INSERT INTO ssh_connection_grants (connection_id, grantee_kind, grantee, created_at) VALUES (` +
		name + `, ` + p(2, "text") + `, ` + p(3, "text") + `, ` + p(4, "timestamptz") + `) ON CONFLICT DO NOTHING RETURNING ` + GrantColumns
	q.GrantGet = `SELECT ` + GrantColumns + ` FROM ssh_connection_grants WHERE ` + grant
	q.GrantDelete = `DELETE FROM ssh_connection_grants WHERE ` + grant + ` RETURNING connection_id`
	q.GrantList = `SELECT ` + GrantColumns + ` FROM ssh_connection_grants WHERE (` + name + ` = '' OR connection_id = ` + name + `)
		ORDER BY connection_id, grantee_kind, grantee`
	return q
}
