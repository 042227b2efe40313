package piece

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/maestro-run/maestro/pieces"
)

// Entry is one piece of a [Catalog] with where it came from.
type Entry struct {
	// Piece is the definition in effect.
	Piece *Piece
	// Source is the file the definition was read from: "builtin:<name>.yaml"
	// for a built-in piece, else the override file's path.
	Source string
	// Builtin reports whether Maestro ships a piece of this name (whether
	// or not an override replaced it).
	Builtin bool
	// Shadowed lists, lowest precedence first, the sources of valid
	// definitions this entry replaced.
	Shadowed []string
	// Rejected lists the override files for this name that failed to load
	// and were ignored; their errors are in [Catalog.Problems].
	Rejected []string
}

// Catalog is the set of pieces available to a Maestro process: the
// built-ins merged with override directories. It is immutable and safe for
// concurrent use.
type Catalog struct {
	entries  []Entry // sorted by name
	problems []error
}

// DefaultDirs returns the override directories in precedence order, lowest
// first: the user's (~/.maestro/pieces) then the project's
// (./.maestro/pieces, relative to workdir). An empty argument leaves its
// directory out; the project directory is left out when it is the user's.
func DefaultDirs(home, workdir string) []string {
	var dirs []string
	if home != "" {
		dirs = append(dirs, filepath.Join(home, ".maestro", "pieces"))
	}
	if workdir != "" {
		d := filepath.Join(workdir, ".maestro", "pieces")
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// Load builds the catalog from Maestro's built-in pieces and the override
// directories dirs, in increasing precedence (see [DefaultDirs]); see
// [LoadFS].
func Load(ctx context.Context, dirs ...string) (*Catalog, error) {
	return LoadFS(ctx, pieces.FS(), dirs...)
}

// LoadFS builds a catalog from the piece files at the root of builtin and
// then from each directory of dirs in turn; a later definition of a name
// replaces an earlier one.
//
// A piece file is <name>.yaml or <name>.yml and must declare that name.
// Other files, subdirectories and hidden files are ignored, as is a
// directory that does not exist.
//
// An override that fails to read or validate does not stop the load and
// does not remove anything: the definition it would have replaced stays in
// effect, the file is listed in that entry's Rejected, and its error (an
// [*Errors] naming the file) is returned by [Catalog.Problems]. Every
// built-in must be valid: LoadFS fails if one is not, and when ctx ends.
func LoadFS(ctx context.Context, builtin fs.FS, dirs ...string) (*Catalog, error) {
	return LoadGuarded(ctx, builtin, Guard{}, dirs...)
}

// LoadGuarded is [LoadFS] with the project directory guard.Dir (one of
// dirs) guarded: a piece file there that grants more than the workspace
// sandbox ([Piece.Grants]) loads only when guard.Trust trusts its exact
// content. An untrusted one is ignored like an invalid override, its
// error an [*UntrustedError]; pieces that grant nothing load as usual.
func LoadGuarded(ctx context.Context, builtin fs.FS, guard Guard, dirs ...string) (*Catalog, error) {
	c := &Catalog{}
	byName := map[string]int{}
	if err := c.addFS(ctx, byName, builtin, ".", "builtin:", true, nil); err != nil {
		return nil, err
	}
	for _, dir := range dirs {
		var g *Guard
		if guard.Dir != "" && filepath.Clean(dir) == filepath.Clean(guard.Dir) {
			g = &guard
		}
		if err := c.addFS(ctx, byName, os.DirFS(dir), dir, "", false, g); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(c.entries, func(a, b Entry) int { return cmp.Compare(a.Piece.Name, b.Piece.Name) })
	return c, nil
}

// addFS loads the piece files of one directory. prefix labels sources:
// "builtin:" for the embedded files, else dir's path is joined.
func (c *Catalog) addFS(ctx context.Context, byName map[string]int, fsys fs.FS, dir, prefix string, builtin bool, guard *Guard) error {
	files, err := fs.ReadDir(fsys, ".")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !builtin {
			return nil
		}
		err = fmt.Errorf("reading piece directory %s: %w", dir, err)
		if builtin {
			return err
		}
		c.problems = append(c.problems, err)
		return nil
	}
	stems := map[string]string{} // stem → first file name, to catch a.yaml + a.yml
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("loading pieces from %s: %w", dir, err)
		}
		name := f.Name()
		ext := path.Ext(name)
		if f.IsDir() || strings.HasPrefix(name, ".") || ext != ".yaml" && ext != ".yml" {
			continue
		}
		stem := strings.TrimSuffix(name, ext)
		source := prefix + name
		if !builtin {
			source = filepath.Join(dir, name)
		}
		var p *Piece
		var data []byte
		var key string // the trust key of a guarded file
		if guard != nil {
			p, data, key, err = loadGuardedFile(filepath.Join(dir, name), source, stem)
		} else {
			p, data, err = loadFile(fsys, name, source, stem)
		}
		if err == nil {
			if first, dup := stems[stem]; dup {
				err = &Errors{List: []Error{{File: source, Message: fmt.Sprintf(
					"piece %q is also defined by %s in the same directory; keep one file per piece", stem, first)}}}
			}
		}
		if err == nil && guard != nil {
			if grants := p.Grants(); len(grants) > 0 && !guard.Trust.Trusted(key, data) {
				stems[stem] = name
				err = &UntrustedError{File: source, Name: p.Name, Piece: p, Grants: grants, Workspace: workspaceOf(dir)}
			}
		}
		if err != nil {
			if builtin {
				return fmt.Errorf("loading built-in piece %s: %w", name, err)
			}
			c.problems = append(c.problems, err)
			if i, ok := byName[stem]; ok {
				c.entries[i].Rejected = append(c.entries[i].Rejected, source)
			}
			continue
		}
		stems[stem] = name
		if i, ok := byName[p.Name]; ok {
			e := &c.entries[i]
			e.Shadowed = append(e.Shadowed, e.Source)
			e.Piece, e.Source = p, source
			continue
		}
		byName[p.Name] = len(c.entries)
		c.entries = append(c.entries, Entry{Piece: p, Source: source, Builtin: builtin})
	}
	return nil
}

// loadFile reads and parses one piece file and checks that it declares the
// name its file name promises.
func loadFile(fsys fs.FS, name, source, stem string) (*Piece, []byte, error) {
	// Only a regular file is read: a FIFO named like a piece (in your own
	// piece directory) hung every load that read it. The project's
	// directory is read with ReadPieceFile, which opens without blocking.
	if fi, err := fs.Stat(fsys, name); err == nil && !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("reading piece file %s: not a regular file", source)
	}
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, nil, fmt.Errorf("reading piece file %s: %w", source, err)
	}
	p, err := Parse(source, data)
	if err != nil {
		return nil, nil, err
	}
	if err := nameMatches(p, source, path.Base(name), stem); err != nil {
		return nil, nil, err
	}
	return p, data, nil
}

// loadGuardedFile is loadFile for a guarded directory: the file is read
// with ReadPieceFile, which also returns its trust key, the real path of
// the file read.
func loadGuardedFile(file, source, stem string) (*Piece, []byte, string, error) {
	data, key, err := ReadPieceFile(file)
	if err != nil {
		return nil, nil, "", fmt.Errorf("reading piece file %s: %w", source, err)
	}
	p, err := Parse(source, data)
	if err != nil {
		return nil, nil, "", err
	}
	if err := nameMatches(p, source, path.Base(file), stem); err != nil {
		return nil, nil, "", err
	}
	return p, data, key, nil
}

// workspaceOf is the project directory of a project piece directory
// (<workspace>/.maestro/pieces), as an absolute path.
func workspaceOf(dir string) string {
	ws := filepath.Dir(filepath.Dir(filepath.Clean(dir)))
	if abs, err := filepath.Abs(ws); err == nil {
		return abs
	}
	return ws
}

// nameMatches is the catalog's rule that a piece file declares the name
// its file name promises (stem: the file name base without .yaml/.yml).
func nameMatches(p *Piece, source, base, stem string) error {
	if p.Name == stem {
		return nil
	}
	return &Errors{List: []Error{{
		File: source, Line: p.NamePos.Line, Col: p.NamePos.Col, Field: "name",
		Message: fmt.Sprintf("expected %q to match the file name %s, found %q", stem, base, p.Name),
	}}}
}

// CheckFile applies to the piece p, parsed from file, the rules the
// catalog adds for the files of its directories: a piece is read only
// from NAME.yaml or NAME.yml (not hidden), and its name must be NAME.
// The error is an *Errors, worded as Catalog.Problems words it.
func CheckFile(file string, p *Piece) error {
	base := filepath.Base(file)
	ext := filepath.Ext(base)
	if strings.HasPrefix(base, ".") || ext != ".yaml" && ext != ".yml" {
		return &Errors{List: []Error{{File: file, Message: fmt.Sprintf(
			"the catalog reads only NAME.yaml or NAME.yml files, not hidden ones; rename %s to %s.yaml", base, p.Name)}}}
	}
	return nameMatches(p, file, base, strings.TrimSuffix(base, ext))
}

// List returns every piece in the catalog, sorted by name. The slice is
// fresh; the pieces are shared and must not be modified.
func (c *Catalog) List() []Entry {
	return slices.Clone(c.entries)
}

// Get returns the piece called name.
func (c *Catalog) Get(name string) (Entry, bool) {
	i, ok := slices.BinarySearchFunc(c.entries, name, func(e Entry, n string) int {
		return cmp.Compare(e.Piece.Name, n)
	})
	if !ok {
		return Entry{}, false
	}
	return c.entries[i], true
}

// Problems returns the errors of override files that were ignored, in load
// order: an [*Errors] for an invalid piece, an [*UntrustedError] for a
// privileged project piece the user has not trusted, or a wrapped I/O
// error.
func (c *Catalog) Problems() []error {
	return slices.Clone(c.problems)
}
