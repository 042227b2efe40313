package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/piece/piecetest"
)

// TestPiecesTrustCommand: 'pieces show' of an untrusted project piece
// prints that file with what it would grant and the trust command (the
// user reads it before trusting); 'pieces trust' of a piece that does not
// exist is a usage error naming the project's pieces; one that grants
// nothing says it needs no trust and records nothing; with no NAME every
// privileged piece is trusted, and then show prints it as in effect.
func TestPiecesTrustCommand(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	env := map[string]string{"MAESTRO_HOME": t.TempDir()}
	dir := filepath.Join(ws, ".maestro", "pieces")
	writeFile(t, filepath.Join(dir, "notes.yaml"), piecetest.Notes)
	writeFile(t, filepath.Join(dir, "relay.yaml"), strings.Replace(strings.Replace(piecetest.Notes, "name: notes", "name: relay", 1),
		"allowed_tools: [Write]", "allowed_tools: [Write, mcp__*]", 1))

	r := runCLI(t, env, "pieces", "show", "relay", "--workspace", ws)
	file := filepath.Join(dir, "relay.yaml")
	for _, want := range []string{
		"# source: " + file + " (UNTRUSTED, ignored: no definition of relay is in effect)",
		"persona: You write notes.",
		"#   movement write: MCP tools mcp__*",
		"# If you trust this file: maestro pieces trust --workspace " + ws + " relay",
	} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("pieces show relay: exit %d, stdout lacks %q:\n%s\nstderr:\n%s", r.code, want, r.stdout, r.stderr)
		}
	}

	r = runCLI(t, env, "pieces", "validate", file)
	if r.code != 0 || !strings.Contains(r.stdout, "is not trusted: the catalog ignores it until you run maestro pieces trust --workspace "+ws+" relay") {
		t.Errorf("pieces validate of an untrusted piece: exit %d\n%s", r.code, r.stdout)
	}
	r = runCLI(t, env, "pieces", "trust", "--workspace", ws, "nosuch")
	if r.code != ExitUsage || !strings.Contains(r.stderr, `no project piece "nosuch"`) || !strings.Contains(r.stderr, "notes, relay") {
		t.Errorf("trust nosuch: exit %d\n%s", r.code, r.stderr)
	}
	r = runCLI(t, env, "pieces", "trust", "--workspace", ws, "notes")
	if r.code != 0 || !strings.Contains(r.stdout, "needs no trust") {
		t.Errorf("trust notes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, env, "pieces", "trust", "--workspace", ws)
	if r.code != 0 || !strings.Contains(r.stdout, "trusted "+file) || strings.Contains(r.stdout, "notes.yaml") {
		t.Errorf("trust: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = runCLI(t, env, "pieces", "validate", file); r.code != 0 || strings.Contains(r.stdout, "not trusted") {
		t.Errorf("pieces validate of a trusted piece: exit %d\n%s", r.code, r.stdout)
	}
	r = runCLI(t, env, "pieces", "show", "relay", "--workspace", ws)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "# source: "+file+"\n") || r.stderr != "" {
		t.Errorf("show after trust: exit %d\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestPiecesTrustRealFile: trust follows the real file. A workspace
// trusted through a link to it is trusted through its own path too (and
// the other way round); a trusted file later replaced by a link to
// another file, even one with the same content, is not trusted.
func TestPiecesTrustRealFile(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	env := map[string]string{"MAESTRO_HOME": t.TempDir()}
	dir := filepath.Join(ws, ".maestro", "pieces")
	relay := strings.Replace(strings.Replace(piecetest.Notes, "name: notes", "name: relay", 1),
		"allowed_tools: [Write]", "allowed_tools: [Write, mcp__*]", 1)
	file := filepath.Join(dir, "relay.yaml")
	writeFile(t, file, relay)
	link := filepath.Join(t.TempDir(), "app")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, env, "pieces", "trust", "--workspace", link, "relay")
	if r.code != 0 || !strings.Contains(r.stdout, "trusted "+filepath.Join(link, ".maestro", "pieces", "relay.yaml")+" (the file at "+file+")") {
		t.Fatalf("trust through a link: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, w := range []string{ws, link} {
		r = runCLI(t, env, "pieces", "list", "--workspace", w)
		if r.code != 0 || strings.Contains(r.stdout, "UNTRUSTED") || !strings.Contains(r.stdout, "relay") {
			t.Errorf("pieces list --workspace %s after trusting through %s: exit %d\n%s%s", w, link, r.code, r.stdout, r.stderr)
		}
	}

	// The trusted file is replaced by a link to a copy elsewhere.
	copyFile := filepath.Join(t.TempDir(), "relay.yaml")
	writeFile(t, copyFile, relay)
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(copyFile, file); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, env, "pieces", "list", "--workspace", ws)
	if r.code != 0 || !strings.Contains(r.stdout, file+" (UNTRUSTED, ignored)") {
		t.Errorf("a trusted file replaced by a link kept its trust: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestRunPieceUntrusted: 'run --piece NAME' treats an untrusted project
// piece as a run without --piece does: it is ignored, said first, and the
// definition it would replace runs; a piece only that file defines is
// refused (exit 2) saying how to read and trust it.
func TestRunPieceUntrusted(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	env := map[string]string{"MAESTRO_HOME": t.TempDir()}
	dir := filepath.Join(ws, ".maestro", "pieces")
	planted := strings.Replace(piecetest.Notes, "name: notes", "name: general", 1)
	planted = strings.Replace(planted, "allowed_tools: [Write]", "allowed_tools: [Write, mcp__*]", 1)
	writeFile(t, filepath.Join(dir, "general.yaml"), planted)
	writeFile(t, filepath.Join(dir, "relay.yaml"), strings.Replace(planted, "name: general", "name: relay", 1))
	trust := "maestro pieces trust --workspace " + ws

	r := runCLI(t, env, "run", "--piece", "general", "--workspace", ws, "say hello")
	out := r.stdout + r.stderr
	if r.code != 0 || !strings.Contains(out, "Ignored an untrusted piece file: "+filepath.Join(dir, "general.yaml")) ||
		!strings.Contains(out, trust+" general") || !strings.Contains(out, "run succeeded") {
		t.Errorf("run --piece general with an untrusted project general: exit %d, want the built-in run after a note\n%s", r.code, out)
	}
	r = runCLI(t, env, "run", "--piece", "relay", "--workspace", ws, "say hello")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "piece relay is defined only by this file, which is not trusted") ||
		!strings.Contains(r.stderr, "maestro pieces show relay --workspace "+ws) || !strings.Contains(r.stderr, trust+" relay") {
		t.Errorf("run --piece relay (only an untrusted file): exit %d\n%s", r.code, r.stderr)
	}
}
