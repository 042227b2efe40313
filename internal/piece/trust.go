package piece

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// TrustFile is the name of the trust record in Maestro's home directory.
const TrustFile = "trusted-pieces.json"

// Grants lists what p grants beyond the workspace sandbox, one entry per
// movement that grants something (then one for required_mcp); nil when
// it grants nothing. These are what a project piece needs the user's
// trust for:
//   - an agent: movement runs an agent CLI, which under the default edit
//     permission runs commands as the user outside the sandbox;
//   - SshExec, SshUpload, SshDownload reach the user's SSH connections;
//   - mcp__ tools and required_mcp start the user's MCP servers with their
//     credentials;
//   - CreatePiece and UpdatePiece write pieces to the user's piece
//     directory, which needs no trust.
//
// Web tools are not grants: they go through the SSRF guard (no private
// addresses) and the built-in general and chat pieces, which any run may
// fall back to, already offer WebSearch and WebFetch.
func (p *Piece) Grants() []string {
	var out []string
	for i := range p.Movements {
		m := &p.Movements[i]
		var g []string
		if m.Agent != "" {
			g = append(g, "agent CLI "+m.Agent+" (runs commands as you, outside the sandbox)")
		}
		var ssh, mcp, pieces []string
		for _, t := range m.AllowedTools {
			switch {
			case isSSHTool(t):
				ssh = append(ssh, t)
			case strings.HasPrefix(t, mcpPrefix):
				mcp = append(mcp, t)
			case t == "CreatePiece" || t == "UpdatePiece":
				pieces = append(pieces, t)
			}
		}
		if len(ssh) > 0 {
			conns := "none"
			if len(m.AllowedSSHConnections) > 0 {
				conns = strings.Join(m.AllowedSSHConnections, ", ")
			}
			g = append(g, fmt.Sprintf("%s on SSH connections: %s", strings.Join(ssh, ", "), conns))
		}
		if len(mcp) > 0 {
			g = append(g, "MCP tools "+strings.Join(mcp, ", "))
		}
		if len(pieces) > 0 {
			g = append(g, strings.Join(pieces, ", ")+" (writes pieces to your piece directory)")
		}
		if len(g) > 0 {
			out = append(out, fmt.Sprintf("movement %s: %s", m.Name, strings.Join(g, "; ")))
		}
	}
	if len(p.RequiredMCP) > 0 {
		out = append(out, "required_mcp: "+strings.Join(p.RequiredMCP, ", ")+" (starts your MCP servers)")
	}
	return out
}

// Trust is the record of the project piece files the user trusts: each
// file's real path (absolute, links resolved: see [ReadPieceFile]) and the
// SHA-256 of the content trusted. A file whose content changed is no
// longer trusted. The zero value trusts nothing.
type Trust struct {
	file  string
	sums  map[string]string // trustKey(path) → hex sha256
	added map[string]string // what Add recorded since the load
}

// trustRecord is the JSON form of the trust file.
type trustRecord struct {
	Pieces map[string]string `json:"pieces"`
}

// LoadTrust reads the trust record file (normally <maestro home>/
// trusted-pieces.json); a missing file trusts nothing.
func LoadTrust(file string) (*Trust, error) {
	t := &Trust{file: file, sums: map[string]string{}}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the piece trust record: %w", err)
	}
	var rec trustRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("read the piece trust record %s: %w (remove it, then trust the project pieces again with 'maestro pieces trust')", file, err)
	}
	for k, v := range rec.Pieces {
		t.sums[k] = v
	}
	return t, nil
}

// trustKey is the key a piece file is recorded under, given its key from
// ReadPieceFile (already absolute and resolved; Abs only cleans a path
// given otherwise).
func trustKey(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	return abs
}

// ReadPieceFile reads a project piece file for a trust decision: its
// content and its key, the real path of the very file read (absolute,
// every link resolved). A workspace reached through another path (a link
// to it, /tmp and /private/tmp) is the same file, so its trust holds; a
// trusted file later replaced by a link to another file is keyed by that
// other file, so it is not trusted unless that file's content is. The
// file is opened once and the key checked to name the file that was read
// (same device and inode), so a swap between reading and resolving is
// refused rather than judged on the wrong file.
func ReadPieceFile(path string) (data []byte, key string, err error) {
	// Non-blocking: a FIFO planted as a piece file must not hang the load.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	read, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	if !read.Mode().IsRegular() {
		return nil, "", fmt.Errorf("%s: not a regular file", path)
	}
	if data, err = io.ReadAll(io.LimitReader(f, maxPieceFile+1)); err != nil {
		return nil, "", err
	}
	if len(data) > maxPieceFile {
		return nil, "", fmt.Errorf("%s: larger than %d bytes, too large for a piece file", path, maxPieceFile)
	}
	if pieceReadHook != nil {
		pieceReadHook(path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, "", err
	}
	if key, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, "", err
	}
	now, err := os.Stat(key)
	if err != nil {
		return nil, "", err
	}
	if !os.SameFile(read, now) {
		return nil, "", fmt.Errorf("%s: replaced while it was read (it now leads to %s); load it again", path, key)
	}
	return data, key, nil
}

// pieceReadHook, when set (tests), runs between ReadPieceFile's read and
// its resolution of the key: where a swap would have to happen.
var pieceReadHook func(path string)

// maxPieceFile bounds what ReadPieceFile reads.
const maxPieceFile = 4 << 20

// Sum is the hex SHA-256 of a piece file's content, as the trust record
// holds it.
func Sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// Trusted reports whether the file whose key (from ReadPieceFile) is key,
// with content data, is trusted.
func (t *Trust) Trusted(key string, data []byte) bool {
	if t == nil || t.sums == nil {
		return false
	}
	sum, ok := t.sums[trustKey(key)]
	return ok && sum == Sum(data)
}

// Add trusts the file whose key (from ReadPieceFile) is key with content
// data (call Save to record it).
func (t *Trust) Add(key string, data []byte) {
	if t.sums == nil {
		t.sums = map[string]string{}
	}
	if t.added == nil {
		t.added = map[string]string{}
	}
	k := trustKey(key)
	t.sums[k] = Sum(data)
	t.added[k] = t.sums[k]
}

// Save writes the record to its file atomically, readable by the user
// only. Under an exclusive lock on <file>.lock, what Add recorded is
// merged into the file as it is now and the result renamed over it, so
// two 'maestro pieces trust' run at once each keep the other's entries.
func (t *Trust) Save() error {
	if t.file == "" {
		return errors.New("the piece trust record has no file")
	}
	dir := filepath.Dir(t.file)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save the piece trust record: %w", err)
	}
	unlock, err := lockTrust(t.file + ".lock")
	if err != nil {
		return fmt.Errorf("save the piece trust record: %w", err)
	}
	defer unlock()
	cur, err := LoadTrust(t.file)
	if err != nil {
		return err
	}
	for k, v := range t.added {
		cur.sums[k] = v
	}
	t.sums = cur.sums
	data, err := json.MarshalIndent(trustRecord{Pieces: t.sums}, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	tmp, err := os.CreateTemp(dir, ".trusted-pieces-*.json")
	if err != nil {
		return fmt.Errorf("save the piece trust record: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("save the piece trust record: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("save the piece trust record: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save the piece trust record: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save the piece trust record: %w", err)
	}
	if err := os.Rename(tmp.Name(), t.file); err != nil {
		return fmt.Errorf("save the piece trust record: %w", err)
	}
	return nil
}

// lockTrust takes an exclusive lock on the lock file (created if need
// be), waiting for another process that holds it; the returned function
// releases it.
func lockTrust(file string) (func(), error) {
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", file, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// Guard makes the privileged pieces (see [Piece.Grants]) of one override
// directory, a workspace's .maestro/pieces, load only when Trust trusts
// their exact content. The zero Guard guards nothing.
type Guard struct {
	// Dir is the guarded directory, as given to the loader.
	Dir string
	// Trust is the user's record; nil trusts nothing.
	Trust *Trust
}

// UntrustedError reports a privileged project piece the catalog ignored
// because the user has not trusted its content.
type UntrustedError struct {
	// File is the piece file.
	File string
	// Name is the piece's name.
	Name string
	// Piece is the definition that was ignored.
	Piece *Piece
	// Grants is what it would grant (see [Piece.Grants]).
	Grants []string
	// Workspace is the project directory the file belongs to.
	Workspace string
}

// TrustCommand is the command that trusts the file.
func (e *UntrustedError) TrustCommand() string {
	return "maestro pieces trust --workspace " + shellQuote(e.Workspace) + " " + e.Name
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("%s: piece %s is not trusted (new or changed since trusted) and grants more than the workspace sandbox:\n  %s\nit is ignored (the definition it would replace stays in effect); if you trust this file, run: %s",
		e.File, e.Name, strings.Join(e.Grants, "\n  "), e.TrustCommand())
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:@,", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Untrusted returns the privileged project pieces the catalog ignored
// because they are not trusted, in load order.
func (c *Catalog) Untrusted() []*UntrustedError {
	var out []*UntrustedError
	for _, err := range c.problems {
		if u, ok := errors.AsType[*UntrustedError](err); ok {
			out = append(out, u)
		}
	}
	return out
}

// UntrustedPiece returns the reason the project piece called name was
// ignored for want of trust, nil when it was not.
func (c *Catalog) UntrustedPiece(name string) *UntrustedError {
	i := slices.IndexFunc(c.Untrusted(), func(u *UntrustedError) bool { return u.Name == name })
	if i < 0 {
		return nil
	}
	return c.Untrusted()[i]
}
