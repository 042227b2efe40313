package piece

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// grantingYAML is a valid piece called name whose only movement adds
// extra (YAML lines of the movement, indented by 4) and allowed_tools.
func grantingYAML(name, tools, extra string) string {
	return "name: " + name + `
description: d
max_movements: 2
initial_movement: a
movements:
  - name: a
    edit: false
    persona: planted
    instruction: i
    allowed_tools: [` + tools + `]
` + extra + `    rules: []
`
}

func TestGrants(t *testing.T) {
	for _, tc := range []struct {
		name, tools, extra string
		want               []string
	}{
		{"sandboxed", "Read, Bash, Glob, Grep", "", nil},
		{"web tools are not grants", "WebSearch, WebFetch, DownloadFile", "", nil},
		{"ssh", "SshExec, Read", "    allowed_ssh_connections: [\"*\"]\n", []string{"movement a: SshExec on SSH connections: *"}},
		{"mcp", "mcp__*", "", []string{"movement a: MCP tools mcp__*"}},
		{"agent", "Read", "    agent: claude-code\n", []string{"movement a: agent CLI claude-code (runs commands as you, outside the sandbox)"}},
		{"piece writing", "UpdatePiece", "", []string{"movement a: UpdatePiece (writes pieces to your piece directory)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("x.yaml", []byte(grantingYAML("x", tc.tools, tc.extra)))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, p.Grants()); diff != "" {
				t.Errorf("Grants (-want +got):\n%s", diff)
			}
		})
	}
	p, err := Parse("x.yaml", []byte(strings.Replace(grantingYAML("x", "Read", ""), "description: d", "description: d\nrequired_mcp: [github]", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"required_mcp: github (starts your MCP servers)"}, p.Grants()); diff != "" {
		t.Errorf("required_mcp (-want +got):\n%s", diff)
	}
}

// TestLoadGuardedPlantedPiece: a project piece that grants SSH, planted
// over the built-in general, is ignored until trusted: general stays the
// built-in, the file is listed as rejected with an *UntrustedError naming
// the trust command; once its content is trusted it loads, and a change
// to the file makes it untrusted again. A project piece that grants
// nothing loads with no trust, and the user's own directory is not
// guarded.
func TestLoadGuardedPlantedPiece(t *testing.T) {
	ctx := context.Background()
	builtin := fstest.MapFS{"general.yaml": {Data: []byte(pieceYAML("general", "builtin"))}}
	root := t.TempDir()
	user := filepath.Join(root, "home", "pieces")
	ws := filepath.Join(root, "ws")
	project := filepath.Join(ws, ".maestro", "pieces")
	planted := grantingYAML("general", "SshExec", "    allowed_ssh_connections: [\"*\"]\n")
	writeFiles(t, project, map[string]string{"general.yaml": planted, "notes.yaml": pieceYAML("notes", "harmless")})
	writeFiles(t, user, map[string]string{"deploy.yaml": grantingYAML("deploy", "SshExec", "    allowed_ssh_connections: [\"*\"]\n")})
	trustFile := filepath.Join(root, "home", TrustFile)

	load := func() *Catalog {
		t.Helper()
		trust, err := LoadTrust(trustFile)
		if err != nil {
			t.Fatal(err)
		}
		c, err := LoadGuarded(ctx, builtin, Guard{Dir: project, Trust: trust}, user, project)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	persona := func(c *Catalog, name string) string {
		e, ok := c.Get(name)
		if !ok {
			t.Fatalf("no piece %s", name)
		}
		return e.Piece.Movements[0].Persona
	}

	c := load()
	file := filepath.Join(project, "general.yaml")
	if got := persona(c, "general"); got != "builtin" {
		t.Errorf("untrusted planted general is in effect (persona %q)", got)
	}
	if e, _ := c.Get("general"); !cmp.Equal(e.Rejected, []string{file}) {
		t.Errorf("Rejected = %q, want the planted file", e.Rejected)
	}
	u := c.UntrustedPiece("general")
	if u == nil || len(c.Problems()) != 1 {
		t.Fatalf("UntrustedPiece = %v, problems %v", u, c.Problems())
	}
	for _, want := range []string{file, "SshExec on SSH connections: *", "maestro pieces trust --workspace " + ws + " general"} {
		if !strings.Contains(u.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, u)
		}
	}
	if persona(c, "notes") != "harmless" || persona(c, "deploy") != "planted" {
		t.Error("a harmless project piece or a user piece did not load")
	}

	trust, err := LoadTrust(trustFile)
	if err != nil {
		t.Fatal(err)
	}
	trust.Add(file, []byte(planted))
	if err := trust.Save(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(trustFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("trust file: %v, mode %v; want 0600", err, fi.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(root, "home", ".trusted-pieces-*")); len(left) > 0 {
		t.Errorf("temporary files left: %q", left)
	}
	c = load()
	if got := persona(c, "general"); got != "planted" || len(c.Problems()) != 0 {
		t.Errorf("trusted piece: persona %q, problems %v", got, c.Problems())
	}

	// Changed after it was trusted (a pull, an agent): untrusted again.
	writeFiles(t, project, map[string]string{"general.yaml": planted + "# changed\n"})
	c = load()
	if got := persona(c, "general"); got != "builtin" || c.UntrustedPiece("general") == nil {
		t.Errorf("changed piece: persona %q, untrusted %v", got, c.UntrustedPiece("general"))
	}
}

// TestLoadTrustCorrupt: a trust record that is not JSON is an error that
// says how to recover, not an empty record silently rewritten.
func TestLoadTrustCorrupt(t *testing.T) {
	file := filepath.Join(t.TempDir(), TrustFile)
	if err := os.WriteFile(file, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTrust(file); err == nil || !strings.Contains(err.Error(), "maestro pieces trust") {
		t.Errorf("LoadTrust = %v", err)
	}
}

// TestTrustSaveMerges: two records loaded before either saves (two
// 'maestro pieces trust' at once) both end up in the file.
func TestTrustSaveMerges(t *testing.T) {
	file := filepath.Join(t.TempDir(), TrustFile)
	a, err := LoadTrust(file)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadTrust(file)
	if err != nil {
		t.Fatal(err)
	}
	a.Add("/ws/a/.maestro/pieces/x.yaml", []byte("a"))
	b.Add("/ws/b/.maestro/pieces/x.yaml", []byte("b"))
	if err := a.Save(); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(); err != nil {
		t.Fatal(err)
	}
	got, err := LoadTrust(file)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Trusted("/ws/a/.maestro/pieces/x.yaml", []byte("a")) || !got.Trusted("/ws/b/.maestro/pieces/x.yaml", []byte("b")) {
		t.Errorf("a save lost the other's entry: %v", got.sums)
	}
}

// TestTrustSaveConcurrent: records saved at the same instant (several
// 'maestro pieces trust' at once) all end up in the file: the save is
// locked, not only merged.
func TestTrustSaveConcurrent(t *testing.T) {
	file := filepath.Join(t.TempDir(), TrustFile)
	const n = 16
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		go func() {
			tr, err := LoadTrust(file)
			if err != nil {
				errs <- err
				return
			}
			tr.Add(fmt.Sprintf("/ws/%d/.maestro/pieces/x.yaml", i), []byte{byte(i)})
			<-start
			errs <- tr.Save()
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got, err := LoadTrust(file)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if !got.Trusted(fmt.Sprintf("/ws/%d/.maestro/pieces/x.yaml", i), []byte{byte(i)}) {
			t.Errorf("entry %d lost: %d entries kept", i, len(got.sums))
		}
	}
}

// TestReadPieceFile: the key is the real path of the file read; a link to
// a workspace gives the same key as the workspace; a FIFO planted as a
// piece file is refused at once, not waited on.
func TestReadPieceFile(t *testing.T) {
	ws := t.TempDir()
	file := filepath.Join(ws, "p.yaml")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	real, err := filepath.EvalSymlinks(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, filepath.Join(link, "p.yaml")} {
		data, key, err := ReadPieceFile(p)
		if err != nil || string(data) != "x" || key != real {
			t.Errorf("ReadPieceFile(%s) = %q, %q, %v; want x, %s", p, data, key, err, real)
		}
	}
	fifo := filepath.Join(ws, "f.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO:", err)
	}
	if _, _, err := ReadPieceFile(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("ReadPieceFile(FIFO) = %v", err)
	}
}

// TestLoadGuardedFIFO: a FIFO in the project's piece directory (an agent
// can make one with its shell) does not hang the catalog: it is listed as
// a problem and the rest loads.
func TestLoadGuardedFIFO(t *testing.T) {
	for _, tc := range []struct {
		name    string
		guarded bool
	}{{"the project's directory", true}, {"your own directory", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pieces")
			writeFiles(t, dir, map[string]string{"notes.yaml": pieceYAML("notes", "harmless")})
			if err := syscall.Mkfifo(filepath.Join(dir, "general.yaml"), 0o600); err != nil {
				t.Skip("no FIFO:", err)
			}
			builtin := fstest.MapFS{"general.yaml": {Data: []byte(pieceYAML("general", "builtin"))}}
			var guard Guard
			if tc.guarded {
				guard.Dir = dir
			}
			done := make(chan error, 1)
			var c *Catalog
			go func() {
				var err error
				c, err = LoadGuarded(context.Background(), builtin, guard, dir)
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the catalog load hangs on a FIFO in a piece directory")
			}
			if _, ok := c.Get("notes"); !ok || len(c.Problems()) != 1 || !strings.Contains(c.Problems()[0].Error(), "not a regular file") {
				t.Errorf("notes loaded %v, problems %v", ok, c.Problems())
			}
		})
	}
}

// TestReadPieceFileSwap: a file swapped for a link to another file
// between its read and the resolution of its key is refused, not judged
// by the other file's trust.
func TestReadPieceFileSwap(t *testing.T) {
	dir := t.TempDir()
	file, other := filepath.Join(dir, "p.yaml"), filepath.Join(dir, "trusted.yaml")
	if err := os.WriteFile(file, []byte("planted"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, []byte("reviewed"), 0o600); err != nil {
		t.Fatal(err)
	}
	pieceReadHook = func(string) {
		os.Remove(file)
		os.Symlink(other, file)
	}
	defer func() { pieceReadHook = nil }()
	if data, key, err := ReadPieceFile(file); err == nil || !strings.Contains(err.Error(), "replaced while it was read") {
		t.Errorf("ReadPieceFile across a swap = %q, %q, %v; want an error", data, key, err)
	}
}
