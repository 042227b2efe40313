package tool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/maestro-run/maestro/internal/gitignore"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/index"
)

// notFile is the mode bits of directory entries Glob leaves out.
const notFile = fs.ModeNamedPipe | fs.ModeSocket | fs.ModeDevice | fs.ModeCharDevice | fs.ModeIrregular

// GlobMaxResults is how many paths one Glob result lists.
const GlobMaxResults = 1000

// maxBraceExpansions bounds how many patterns one brace expression may
// expand to.
const maxBraceExpansions = 256

// GlobInput is the input of the Glob tool.
type GlobInput struct {
	Pattern string `json:"pattern" jsonschema:"glob matched against paths relative to path: * and ? within a name, ** across directories, [abc] classes, {a,b} alternatives; e.g. **/*.go or src/**/*.{ts,tsx}"`
	Path    string `json:"path,omitempty" jsonschema:"directory to search, relative to the workspace root; default the workspace root"`
}

const globDescription = `Find files of the workspace by name pattern. * and ? match within one path ` +
	`segment, ** matches any number of directories ({a,b} gives alternatives): "*.go" matches only at the top ` +
	`of path, "**/*.go" at any depth. Returns paths relative to the workspace root, sorted; files ignored ` +
	`by .gitignore are left out.`

// NewGlob returns the Glob tool: files of root whose paths match a pattern.
func NewGlob(root *workspace.Root) Tool {
	return New("Glob", globDescription, true, func(ctx context.Context, in GlobInput, _ Call) (Result, error) {
		return globFiles(ctx, root, in)
	})
}

func globFiles(ctx context.Context, root *workspace.Root, in GlobInput) (Result, error) {
	if strings.TrimSpace(in.Pattern) == "" {
		return Failf(CodeInvalidInput, "pattern is required"), nil
	}
	base, res, ok := searchBase(root, in.Path)
	if !ok {
		return res, nil
	}
	pattern := in.Pattern
	if filepath.IsAbs(pattern) {
		// An absolute pattern inside the workspace: match from the root.
		rel, err := root.Rel(pattern)
		if err != nil {
			return Failf(CodeWorkspaceViolation, "pattern is outside the workspace: %s", workspace.Excerpt(in.Pattern)), nil
		}
		pattern, base = filepath.ToSlash(rel), "."
	}
	pattern = strings.TrimPrefix(pattern, "./")
	globs, err := compileGlobs(pattern)
	if err != nil {
		return Failf(CodeInvalidInput, "invalid pattern %q: %s", workspace.Excerpt(in.Pattern), workspace.Excerpt(err.Error())), nil
	}
	if fi, err := root.Stat(base); err != nil {
		return fileErrorResult(displayPath(base), err), nil
	} else if !fi.IsDir() {
		return Failf(CodeInvalidInput, "%s is not a directory; path must be a directory", workspace.Excerpt(displayPath(base))), nil
	}

	found, indexed, err := globIndexed(ctx, root, base, globs)
	if !indexed && err == nil {
		found, err = globWalk(ctx, root, base, globs)
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Result{}, ctxErr
		}
		return fileErrorResult(displayPath(base), err), nil
	}
	if len(found) == 0 {
		msg := fmt.Sprintf("no files match %q", workspace.Excerpt(in.Pattern))
		if base != "." {
			msg += " in " + workspace.Excerpt(displayPath(base))
		}
		if !strings.Contains(pattern, "/") && !strings.Contains(pattern, "**") {
			p := workspace.Excerpt(pattern)
			msg += fmt.Sprintf(" (patterns match whole paths: %q looks only at the top level; use %q to search subdirectories)", p, "**/"+p)
		}
		return Result{Content: msg}, nil
	}
	slices.Sort(found)
	var out strings.Builder
	for _, p := range found[:min(len(found), GlobMaxResults)] {
		out.WriteString(p)
		out.WriteByte('\n')
	}
	if len(found) > GlobMaxResults {
		fmt.Fprintf(&out, "\n[showing the first %d of %d matching files, sorted by path; use a more specific pattern or path]\n",
			GlobMaxResults, len(found))
	}
	return Result{Content: out.String()}, nil
}

// searchBase checks the optional path input of Glob and Grep and returns
// it slash-separated relative to the root ("." by default).
func searchBase(root *workspace.Root, p string) (string, Result, bool) {
	if p == "" {
		return ".", Result{}, true
	}
	rel, err := root.Rel(p)
	if err != nil {
		return "", fileErrorResult(p, err), false
	}
	return filepath.ToSlash(rel), Result{}, true
}

// relTo returns p relative to base (both slash-separated, relative to the
// workspace root; p is base or below it).
func relTo(base, p string) string {
	if base == "." {
		return p
	}
	if p == base {
		return "."
	}
	return strings.TrimPrefix(p, base+"/")
}

// displayPath shows a slash-separated relative path to the model.
func displayPath(p string) string {
	if p == "." {
		return ". (the workspace root)"
	}
	return p
}

func anyMatch(globs []*gitignore.Glob, p string) bool {
	for _, g := range globs {
		if g.Match(p) {
			return true
		}
	}
	return false
}

func anyCouldMatchInside(globs []*gitignore.Glob, dir string) bool {
	for _, g := range globs {
		if g.CouldMatchInside(dir) {
			return true
		}
	}
	return false
}

// compileGlobs compiles a pattern with {a,b} alternatives into one Glob
// per alternative.
func compileGlobs(pattern string) ([]*gitignore.Glob, error) {
	alts, err := expandBraces(pattern)
	if err != nil {
		return nil, err
	}
	globs := make([]*gitignore.Glob, 0, len(alts))
	for _, a := range alts {
		g, err := gitignore.CompileGlob(a)
		if err != nil {
			return nil, err
		}
		globs = append(globs, g)
	}
	return globs, nil
}

// expandBraces expands {a,b,c} alternatives (nested ones too); a backslash
// escapes a brace or comma, and braces without a comma are literal.
func expandBraces(p string) ([]string, error) {
	open := -1
	depth := 0
	commas := []int{}
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				open = i
				commas = commas[:0]
			}
			depth++
		case ',':
			if depth == 1 {
				commas = append(commas, i)
			}
		case '}':
			if depth == 0 {
				continue
			}
			depth--
			if depth > 0 {
				continue
			}
			if len(commas) == 0 {
				// "{x}": literal braces; look for alternatives later on.
				rest, err := expandBraces(p[i+1:])
				if err != nil {
					return nil, err
				}
				head := p[:i+1]
				out := make([]string, len(rest))
				for k, r := range rest {
					out[k] = head + r
				}
				return out, nil
			}
			prefix, suffix := p[:open], p[i+1:]
			bounds := append(append([]int{open}, commas...), i)
			var out []string
			for k := 0; k+1 < len(bounds); k++ {
				alt := p[bounds[k]+1 : bounds[k+1]]
				expanded, err := expandBraces(prefix + alt + suffix)
				if err != nil {
					return nil, err
				}
				out = append(out, expanded...)
				if len(out) > maxBraceExpansions {
					return nil, fmt.Errorf("more than %d alternatives", maxBraceExpansions)
				}
			}
			return out, nil
		}
	}
	if depth > 0 {
		return nil, errors.New("unclosed {")
	}
	return []string{p}, nil
}

// matchFileGlob reports whether a file (path relative to the search base)
// passes a filter: a pattern without a slash is matched against the file
// name, one with a slash against the whole relative path.
func matchFileGlob(globs []*gitignore.Glob, nameOnly bool, rel string) bool {
	if nameOnly {
		rel = path.Base(rel)
	}
	return anyMatch(globs, rel)
}

// globIndexed returns the files and symbolic links of the workspace index
// (internal/workspace/index) below base that match globs; indexed is false
// when base is not indexed (it is ignored) and the tree must be walked.
func globIndexed(ctx context.Context, root *workspace.Root, base string, globs []*gitignore.Glob) (found []string, indexed bool, err error) {
	var visit func(d *index.Dir)
	visit = func(d *index.Dir) {
		for _, names := range []func(func(string) bool){d.Files(), d.Links()} {
			for name := range names {
				if p := path.Join(d.Rel(), name); anyMatch(globs, relTo(base, p)) {
					found = append(found, p)
				}
			}
		}
		for _, sub := range d.Dirs() {
			if anyCouldMatchInside(globs, relTo(base, sub.Rel())) {
				visit(sub)
			}
		}
	}
	indexed, err = index.Of(root).Read(ctx, base, visit)
	if errors.Is(err, index.ErrClosed) {
		return nil, false, nil
	}
	return found, indexed, err
}

// globWalk walks the tree below base for the files that match globs (when
// base is not indexed).
func globWalk(ctx context.Context, root *workspace.Root, base string, globs []*gitignore.Glob) ([]string, error) {
	var found []string
	err := gitignore.Walk(ctx, root.FS(), base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == base {
				return err
			}
			return nil // unreadable entries are skipped
		}
		rel := relTo(base, p)
		if d.IsDir() {
			if rel != "." && !anyCouldMatchInside(globs, rel) {
				return fs.SkipDir
			}
			return nil
		}
		if d.Type()&notFile != 0 {
			return nil // FIFOs, devices and sockets are not files to work on
		}
		if anyMatch(globs, rel) {
			found = append(found, p)
		}
		return nil
	})
	return found, err
}
