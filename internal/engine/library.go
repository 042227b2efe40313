package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/maestro-run/maestro/internal/piece"
	"github.com/maestro-run/maestro/internal/tool"
	"github.com/maestro-run/maestro/pieces"
)

// Library is the set of pieces a Maestro process works with: the piece
// catalog (built-ins merged with override directories, see piece.Load)
// plus a directory where new pieces are saved. It backs the classifier,
// subtasks and the piece tools (ListPieces, GetPiece, CreatePiece,
// UpdatePiece). It is safe for concurrent use.
type Library struct {
	builtin  fs.FS
	guard    piece.Guard
	dirs     []string
	writeDir string

	mu  sync.RWMutex
	cat *piece.Catalog
}

// NewLibrary loads Maestro's built-in pieces and the override directories
// dirs (lowest precedence first, see piece.DefaultDirs). writeDir is where
// CreatePiece and UpdatePiece save pieces (normally ~/.maestro/pieces); it
// is added to dirs, just above the built-ins, when it is not among them.
// An empty writeDir makes the library read-only.
func NewLibrary(ctx context.Context, dirs []string, writeDir string) (*Library, error) {
	return NewLibraryFS(ctx, pieces.FS(), dirs, writeDir)
}

// NewLibraryFS is NewLibrary with the built-in pieces read from builtin.
func NewLibraryFS(ctx context.Context, builtin fs.FS, dirs []string, writeDir string) (*Library, error) {
	return NewGuardedLibrary(ctx, builtin, piece.Guard{}, dirs, writeDir)
}

// NewGuardedLibrary is NewLibraryFS with guard.Dir, the project's piece
// directory, guarded: its pieces that grant more than the workspace
// sandbox load only when the user trusts them (piece.LoadGuarded).
func NewGuardedLibrary(ctx context.Context, builtin fs.FS, guard piece.Guard, dirs []string, writeDir string) (*Library, error) {
	dirs = slices.Clone(dirs)
	if writeDir != "" && !slices.Contains(dirs, writeDir) {
		dirs = append([]string{writeDir}, dirs...)
	}
	l := &Library{builtin: builtin, guard: guard, dirs: dirs, writeDir: writeDir}
	if err := l.Reload(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// Reload reads the pieces again.
func (l *Library) Reload(ctx context.Context) error {
	cat, err := piece.LoadGuarded(ctx, l.builtin, l.guard, l.dirs...)
	if err != nil {
		return fmt.Errorf("load pieces: %w", err)
	}
	l.mu.Lock()
	l.cat = cat
	l.mu.Unlock()
	return nil
}

// Catalog returns the current catalog.
func (l *Library) Catalog() *piece.Catalog {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cat
}

// Get returns the piece called name.
func (l *Library) Get(name string) (*piece.Piece, bool) {
	e, ok := l.Catalog().Get(name)
	return e.Piece, ok
}

// Names lists the pieces' names, sorted.
func (l *Library) Names() []string {
	var names []string
	for _, e := range l.Catalog().List() {
		names = append(names, e.Piece.Name)
	}
	return names
}

// WriteDir is where new pieces are saved ("" when read-only).
func (l *Library) WriteDir() string { return l.writeDir }

// Create validates src as a new piece called name and saves it to the
// write directory. A piece that fails the validator is reported as the
// validator's *piece.Errors, unchanged.
func (l *Library) Create(ctx context.Context, name, src string) (piece.Entry, error) {
	return l.save(ctx, name, src, false)
}

// Update validates src and replaces the whole piece called name, which
// must exist (a built-in is overridden by a file in the write directory).
func (l *Library) Update(ctx context.Context, name, src string) (piece.Entry, error) {
	return l.save(ctx, name, src, true)
}

func (l *Library) save(ctx context.Context, name, src string, update bool) (piece.Entry, error) {
	if l.writeDir == "" {
		return piece.Entry{}, errors.New("pieces cannot be saved here: no user piece directory is configured")
	}
	file := name + ".yaml"
	p, err := piece.Parse(file, []byte(src))
	if err != nil {
		return piece.Entry{}, err
	}
	if p.Name != name {
		return piece.Entry{}, &piece.Errors{List: []piece.Error{{File: file, Line: p.NamePos.Line, Col: p.NamePos.Col, Field: "name",
			Message: fmt.Sprintf("expected %q, the name the piece is saved under, found %q", name, p.Name)}}}
	}
	existing, exists := l.Catalog().Get(name)
	switch {
	case update && !exists:
		return piece.Entry{}, fmt.Errorf("there is no piece %q to update; create it with CreatePiece", name)
	case !update && exists:
		return piece.Entry{}, fmt.Errorf("a piece %q already exists (%s); choose another name, or replace it with UpdatePiece", name, existing.Source)
	}
	path := filepath.Join(l.writeDir, file)
	if _, err := os.Stat(filepath.Join(l.writeDir, name+".yml")); err == nil {
		return piece.Entry{}, fmt.Errorf("%s exists; edit or remove that file instead", filepath.Join(l.writeDir, name+".yml"))
	}
	if err := os.MkdirAll(l.writeDir, 0o755); err != nil {
		return piece.Entry{}, fmt.Errorf("save piece %s: %w", name, err)
	}
	if err := writeFileAtomic(path, []byte(src), 0o644); err != nil {
		return piece.Entry{}, fmt.Errorf("save piece %s: %w", name, err)
	}
	if err := l.Reload(ctx); err != nil {
		return piece.Entry{}, err
	}
	e, _ := l.Catalog().Get(name)
	return e, nil
}

// ListPiecesInput is the input of ListPieces (none).
type ListPiecesInput struct{}

// GetPieceInput is the input of GetPiece.
type GetPieceInput struct {
	Name string `json:"name" jsonschema:"the piece's name"`
}

// SavePieceInput is the input of CreatePiece and UpdatePiece.
type SavePieceInput struct {
	Name        string `json:"name" jsonschema:"the piece's name, equal to the name field of the YAML"`
	YAMLContent string `json:"yaml_content" jsonschema:"the whole piece as YAML"`
}

// tool returns the piece tool called name.
func (l *Library) tool(name string) tool.Tool {
	switch name {
	case "ListPieces":
		return tool.New("ListPieces", "List the pieces (workflows) Maestro knows: name, source, movements and the first line of the description.", true,
			func(context.Context, ListPiecesInput, tool.Call) (tool.Result, error) {
				var b strings.Builder
				entries := l.Catalog().List()
				fmt.Fprintf(&b, "%d pieces:\n", len(entries))
				for _, e := range entries {
					desc, _, _ := strings.Cut(strings.TrimSpace(e.Piece.Description), "\n")
					fmt.Fprintf(&b, "- %s (%s; movements: %s): %s\n", e.Piece.Name, e.Source, strings.Join(e.Piece.MovementNames(), ", "), desc)
				}
				return tool.Result{Content: b.String()}, nil
			})
	case "GetPiece":
		return tool.New("GetPiece", "Return a piece's definition as YAML.", true,
			func(_ context.Context, in GetPieceInput, _ tool.Call) (tool.Result, error) {
				e, ok := l.Catalog().Get(in.Name)
				if !ok {
					return tool.Errorf("no piece %q; pieces: %s", in.Name, strings.Join(l.Names(), ", ")), nil
				}
				data, err := piece.Marshal(e.Piece)
				if err != nil {
					return tool.Errorf("GetPiece %s: %v", in.Name, err), nil
				}
				return tool.Result{Content: "# source: " + e.Source + "\n" + string(data)}, nil
			})
	case "CreatePiece", "UpdatePiece":
		update := name == "UpdatePiece"
		desc := "Validate a new piece and save it. On failure the validator's messages are returned (file:line:col: field: message); fix every one and call again."
		if update {
			desc = "Validate a piece and replace the existing piece of that name with it (the whole piece). On failure the validator's messages are returned (file:line:col: field: message)."
		}
		return tool.New(name, desc, false, func(ctx context.Context, in SavePieceInput, _ tool.Call) (tool.Result, error) {
			// The model may not grant itself more than the sandbox: a piece
			// saved here is in effect with no trust step (the user's piece
			// directory is trusted), so a prompt-injected task could give
			// later runs an agent CLI, SSH or MCP (docs/pieces.md, "Trust").
			if p, err := piece.Parse(in.Name+".yaml", []byte(in.YAMLContent)); err == nil {
				if g := p.Grants(); len(g) > 0 {
					return tool.Result{IsError: true, Content: fmt.Sprintf("%s refused: the piece grants more than the workspace sandbox (%s), and a model may not save such a piece. Save it without those grants, or give the YAML to the user to review and save as %s themselves.",
						name, strings.Join(g, "; "), filepath.Join(l.writeDir, in.Name+".yaml"))}, nil
				}
			}
			e, err := l.save(ctx, in.Name, in.YAMLContent, update)
			if err != nil {
				return tool.Result{Content: err.Error(), IsError: true}, nil
			}
			verb := "created"
			if update {
				verb = "updated"
			}
			msg := fmt.Sprintf("Piece %s %s: it passed the validator and was saved to %s.", in.Name, verb, filepath.Join(l.writeDir, in.Name+".yaml"))
			if want := filepath.Join(l.writeDir, in.Name+".yaml"); e.Source != want {
				msg += fmt.Sprintf(" Note: %s takes precedence over it.", e.Source)
			}
			return tool.Result{Content: msg}, nil
		})
	}
	return nil
}
