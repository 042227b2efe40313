package tool

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/maestro-run/maestro/internal/gitignore"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/index"
	"github.com/maestro-run/maestro/internal/workspace/walk"
)

// Limits of the Grep tool.
const (
	// GrepDefaultMaxResults is how many matching lines Grep returns when
	// max_results is not given.
	GrepDefaultMaxResults = 200
	// GrepMaxLineChars is where Grep cuts a long matching line.
	GrepMaxLineChars = 500
	// grepChunkBytes is how much of a large file is searched at a time;
	// smaller files are read whole with one read.
	grepChunkBytes = 16 << 20
	// regexpBlockBytes is the size of the blocks of lines the regexp engine
	// scans when there is no literal to look for.
	regexpBlockBytes = 2 << 10
	// maxPrefilterLiterals bounds the alternatives of a prefilter.
	maxPrefilterLiterals = 16
)

// GrepInput is the input of the Grep tool.
type GrepInput struct {
	Pattern    string `json:"pattern" jsonschema:"regular expression (Go RE2 syntax), matched against each line"`
	Path       string `json:"path,omitempty" jsonschema:"file or directory to search, relative to the workspace root; default the whole workspace"`
	Glob       string `json:"glob,omitempty" jsonschema:"only search files matching this glob, e.g. *.go or src/**/*.{ts,tsx}; without a slash it matches file names"`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match letters case-insensitively"`
	MaxResults int    `json:"max_results,omitempty" jsonschema:"maximum number of matching lines to return; default 200"`
}

const grepDescription = `Search file contents of the workspace with a regular expression (Go RE2 syntax: ` +
	`no backreferences or lookaround), line by line. Prints path:line:text for each matching line, sorted by ` +
	`path and line. Files ignored by .gitignore, binary files and symbolic links are skipped. Narrow the search ` +
	`with path (a file or directory) and glob (e.g. "*.go").`

// NewGrep returns the Grep tool: a parallel regular-expression search over
// the files of root.
func NewGrep(root *workspace.Root) Tool {
	return New("Grep", grepDescription, true, func(ctx context.Context, in GrepInput, _ Call) (Result, error) {
		return grep(ctx, root, in, grepChunkBytes)
	})
}

// grep runs one search; files larger than chunk bytes are read in chunks
// of that size.
func grep(ctx context.Context, root *workspace.Root, in GrepInput, chunk int) (Result, error) {
	if in.Pattern == "" {
		return Failf(CodeInvalidInput, "pattern is required"), nil
	}
	if in.MaxResults < 0 {
		return Failf(CodeInvalidInput, "max_results must not be negative"), nil
	}
	maxResults := in.MaxResults
	if maxResults == 0 {
		maxResults = GrepDefaultMaxResults
	}
	m, err := compileLineMatcher(in.Pattern, in.IgnoreCase)
	if err != nil {
		return Failf(CodeInvalidInput, "invalid pattern: %s", workspace.Excerpt(err.Error())), nil
	}
	base, res, ok := searchBase(root, in.Path)
	if !ok {
		return res, nil
	}
	shown := in.Path // the path as named in messages
	if shown == "" {
		shown = "."
	}
	s := &grepSearch{
		ctx:     ctx,
		root:    root,
		matcher: m,
		chunk:   chunk,
		results: &topMatches{max: maxResults},
	}
	if in.Glob != "" {
		globs, err := compileGlobs(strings.TrimPrefix(in.Glob, "./"))
		if err != nil {
			return Failf(CodeInvalidInput, "invalid glob %q: %s", workspace.Excerpt(in.Glob), workspace.Excerpt(err.Error())), nil
		}
		s.globs = globs
		s.globNameOnly = !strings.Contains(in.Glob, "/")
	}

	fi, err := root.Stat(shown)
	if err != nil {
		return fileErrorResult(shown, err), nil
	}
	switch {
	case fi.IsDir():
		s.base = base
		if err := s.walk(); err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return Result{}, ctxErr
			}
			return fileErrorResult(shown, err), nil
		}
	case fi.Mode().IsRegular():
		// A file named explicitly is searched even if ignored; a binary
		// one is reported. It is opened without blocking and checked
		// again on the opened descriptor, in case it was swapped.
		f, _, err := root.OpenRegular(shown)
		if err != nil {
			return fileErrorResult(shown, err), nil
		}
		w := s.newWorker()
		binary, err := w.searchStream(f, base)
		f.Close()
		if err != nil {
			return fileErrorResult(shown, err), nil
		}
		if binary {
			return Result{Content: fmt.Sprintf("%s is a binary file; not searched", workspace.Excerpt(in.Path))}, nil
		}
	default:
		return fileErrorResult(shown, &workspace.NotRegularError{Path: shown, Mode: fi.Mode()}), nil
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	return s.result(in), nil
}

// grepSearch is one Grep call.
type grepSearch struct {
	ctx          context.Context
	root         *workspace.Root
	matcher      *lineMatcher
	globs        []*gitignore.Glob
	globNameOnly bool
	base         string // slash-separated directory searched
	chunk        int    // bytes read at a time from large files

	results *topMatches

	mu         sync.Mutex
	unreadable int // files or directories that could not be read
}

func (s *grepSearch) result(in GrepInput) Result {
	r := s.results
	if r.total == 0 {
		msg := fmt.Sprintf("no matches for %q", workspace.Excerpt(in.Pattern))
		if in.Path != "" {
			msg += " in " + workspace.Excerpt(in.Path)
		}
		if in.Glob != "" {
			msg += fmt.Sprintf(" (files matching %q)", workspace.Excerpt(in.Glob))
		}
		return Result{Content: msg + s.unreadableNote()}
	}
	matches := r.sorted()
	var out strings.Builder
	out.Grow(len(matches) * 80)
	for _, m := range matches {
		out.WriteString(m.path)
		out.WriteByte(':')
		out.WriteString(strconv.Itoa(m.line))
		out.WriteByte(':')
		out.WriteString(m.text)
		out.WriteByte('\n')
	}
	if r.total > len(matches) {
		fmt.Fprintf(&out, "\n[showing the first %d of %d matching lines (in %d files), sorted by path and line; "+
			"narrow the pattern, path or glob, or raise max_results]\n", len(matches), r.total, r.files)
	}
	if note := s.unreadableNote(); note != "" {
		out.WriteString(strings.TrimPrefix(note, " ") + "\n")
	}
	return Result{Content: out.String()}
}

func (s *grepSearch) unreadableNote() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unreadable == 0 {
		return ""
	}
	return fmt.Sprintf(" [%d files or directories could not be read]", s.unreadable)
}

func (s *grepSearch) noteUnreadable() {
	s.mu.Lock()
	s.unreadable++
	s.mu.Unlock()
}

// ---- parallel walk ----

// walk searches the files below s.base: those of the workspace index
// (internal/workspace/index) that pass the glob filter, or, when s.base
// is not indexed (it is ignored), those of a walk of the tree.
func (s *grepSearch) walk() error {
	var dirs []walk.Listed
	ok, err := index.Of(s.root).Read(s.ctx, s.base, func(d *index.Dir) { dirs = s.listIndexed(d, dirs) })
	newWorker := func() walk.Worker { return s.newWorker() }
	switch {
	case err == nil && ok:
		return walk.Files(s.ctx, s.root, dirs, newWorker)
	case err != nil && !errors.Is(err, index.ErrClosed):
		return err
	}
	return walk.Walk(s.ctx, s.root, s.base, newWorker)
}

// listIndexed appends to dirs the files of indexed directory d and its
// subdirectories that pass the glob filter, as grepWorker.List chooses
// them during a walk.
func (s *grepSearch) listIndexed(d *index.Dir, dirs []walk.Listed) []walk.Listed {
	if d.Failed() {
		s.noteUnreadable()
	}
	var names []string
	for name := range d.Files() {
		if s.globs != nil && !matchFileGlob(s.globs, s.globNameOnly, relTo(s.base, path.Join(d.Rel(), name))) {
			continue
		}
		names = append(names, name)
	}
	if len(names) > 0 {
		dirs = append(dirs, walk.Listed{Rel: d.Rel(), Names: names})
	}
	for _, sub := range d.Dirs() {
		if s.globs != nil && !s.globNameOnly && !anyCouldMatchInside(s.globs, relTo(s.base, sub.Rel())) {
			continue
		}
		dirs = s.listIndexed(sub, dirs)
	}
	return dirs
}

// grepWorker holds the buffers of one worker goroutine.
type grepWorker struct {
	s       *grepSearch
	buf     []byte
	matches []lineMatch
	full    bool      // the results were full when the file started
	last    fileMatch // then: the last match kept
}

func (s *grepSearch) newWorker() *grepWorker { return &grepWorker{s: s} }

// List queues the subdirectories and files of d that are not ignored and
// pass the glob filter.
func (w *grepWorker) List(d *walk.Dir, entries []fs.DirEntry, rules *gitignore.Stack, err error) []walk.Task {
	if err != nil {
		w.s.noteUnreadable()
	}
	if d == nil {
		return nil
	}
	dirRel := d.Rel()
	tasks := make([]walk.Task, 0, len(entries))
	for _, e := range entries {
		typ := e.Type()
		if !typ.IsDir() && !typ.IsRegular() {
			continue // symbolic links, devices, pipes, sockets
		}
		p := path.Join(dirRel, e.Name())
		if rules.Match(p, typ.IsDir()) {
			continue
		}
		rel := relTo(w.s.base, p)
		if typ.IsDir() {
			if w.s.globs != nil && !w.s.globNameOnly && !anyCouldMatchInside(w.s.globs, rel) {
				continue
			}
		} else if w.s.globs != nil && !matchFileGlob(w.s.globs, w.s.globNameOnly, rel) {
			continue
		}
		tasks = append(tasks, walk.Task{Name: e.Name(), IsDir: typ.IsDir(), Rules: rules})
	}
	return tasks
}

// Done implements walk.Worker: a worker keeps no results of its own.
func (w *grepWorker) Done() {}

// File searches one file task.
func (w *grepWorker) File(t walk.Task) {
	d := t.Dir
	p := path.Join(d.Rel(), t.Name)
	data, _, err := d.ReadFile(t.Name, w.buf, int64(w.s.chunk))
	switch {
	case err == nil:
		if cap(data) > cap(w.buf) {
			w.buf = data[:0]
		}
		w.searchData(data, p)
	case errors.Is(err, workspace.ErrTooLarge):
		f, err := d.Open(t.Name)
		if err != nil {
			w.s.noteUnreadable()
			return
		}
		defer f.Close()
		if _, err := w.searchStream(f, p); err != nil {
			w.s.noteUnreadable()
		}
	default:
		w.s.noteUnreadable()
	}
}

// searchData searches the whole content of a file, recording its matches
// under the name p. A file with a NUL byte is binary and skipped.
func (w *grepWorker) searchData(data []byte, p string) (binary bool) {
	if bytes.IndexByte(data, 0) >= 0 {
		return true
	}
	w.matches = w.matches[:0]
	w.last, w.full = w.s.results.threshold()
	if _, found := w.searchBuffer(data, 1, p); found > 0 {
		w.s.results.add(p, w.matches, found)
	}
	return false
}

// searchStream searches an open file in chunks cut at line ends,
// recording its matches under the name p. A file with a NUL byte is binary:
// it is skipped and reported.
func (w *grepWorker) searchStream(f *os.File, p string) (binary bool, err error) {
	size := int64(w.s.chunk)
	if fi, err := f.Stat(); err == nil {
		size = min(size, fi.Size()+1) // +1 sees the end in one ReadFull
	}
	buf := make([]byte, max(size, 1))
	w.matches = w.matches[:0]
	w.last, w.full = w.s.results.threshold()
	lineNo := 1 // number of the first line in buf
	carry := 0  // bytes of an incomplete line kept at the start of buf
	total := 0
	for {
		if err := w.s.ctx.Err(); err != nil {
			return false, err
		}
		n, err := io.ReadFull(f, buf[carry:])
		eof := errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
		if err != nil && !eof {
			return false, err
		}
		end := carry + n
		data := buf[:end]
		if bytes.IndexByte(data[carry:], 0) >= 0 {
			return true, nil
		}
		cut := end
		if !eof {
			cut = bytes.LastIndexByte(data, '\n') + 1
			if cut == 0 {
				// One line longer than the buffer: grow it.
				nb := make([]byte, 2*len(buf))
				copy(nb, data)
				buf = nb
				carry = end
				continue
			}
		}
		nlines, found := w.searchBuffer(data[:cut], lineNo, p)
		total += found
		if eof {
			break
		}
		lineNo += nlines
		carry = copy(buf, data[cut:])
	}
	if total > 0 {
		w.s.results.add(p, w.matches, total)
	}
	return false, nil
}

// searchBuffer finds the matching lines of data (whole lines; the first is
// line first). It keeps up to the result limit of them in w.matches and
// returns the number of lines in data (only needed between chunks) and the
// number of matching lines.
func (w *grepWorker) searchBuffer(data []byte, first int, p string) (lines, found int) {
	m := w.s.matcher
	limit := w.s.results.max
	lineNo, counted := first, 0 // line number of data[counted:]
	emit := func(start, end int) {
		lineNo += bytes.Count(data[counted:start], []byte{'\n'})
		counted = start
		found++
		if len(w.matches) < limit && (!w.full || compareMatch(p, lineNo, w.last) < 0) {
			w.matches = append(w.matches, lineMatch{line: lineNo, text: cutMatchLine(data[start:end])})
		}
	}
	m.scan(data, emit)
	if len(data) > 0 {
		lines = lineNo - first + bytes.Count(data[counted:], []byte{'\n'})
	}
	return lines, found
}

// cutMatchLine returns a matching line for display: without its carriage
// return, cut at GrepMaxLineChars characters, valid UTF-8.
func cutMatchLine(line []byte) string {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) <= GrepMaxLineChars {
		return strings.ToValidUTF8(string(line), "\uFFFD")
	}
	end, chars := 0, 0
	for end < len(line) && chars < GrepMaxLineChars {
		_, n := utf8.DecodeRune(line[end:])
		end += n
		chars++
	}
	if end == len(line) {
		return strings.ToValidUTF8(string(line), "\uFFFD")
	}
	return strings.ToValidUTF8(string(line[:end]), "\uFFFD") + fmt.Sprintf("… [line cut: %d bytes in all]", len(line))
}

// ---- results ----

type lineMatch struct {
	line int
	text string
}

type fileMatch struct {
	path string
	line int
	text string
}

// topMatches keeps the first max matches by (path, line) from files
// searched in any order, and counts all of them.
type topMatches struct {
	max int

	mu    sync.Mutex
	best  *walk.Best[fileMatch]
	total int // matching lines
	files int // files with a match
}

// threshold returns the last match kept when the results are full (a
// later match cannot be among them); workers use it to avoid copying
// lines that would be dropped. It only ever decreases.
func (t *topMatches) threshold() (fileMatch, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := t.kept(); b.Full() {
		return b.Worst(), true
	}
	return fileMatch{}, false
}

// kept returns the matches kept, made on first use; t.mu is held.
func (t *topMatches) kept() *walk.Best[fileMatch] {
	if t.best == nil {
		t.best = walk.NewBest(t.max, func(a, b fileMatch) int { return compareMatch(a.path, a.line, b) })
	}
	return t.best
}

// add records the matches of one file (sorted by line) and the number of
// its matching lines.
func (t *topMatches) add(p string, ms []lineMatch, total int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += total
	t.files++
	b := t.kept()
	for _, m := range ms {
		if !b.Offer(fileMatch{path: p, line: m.line, text: m.text}) {
			break // later lines of this file come after it too
		}
	}
}

func (t *topMatches) sorted() []fileMatch {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.kept().Sorted()
}

func compareMatch(p string, line int, b fileMatch) int {
	if c := strings.Compare(p, b.path); c != 0 {
		return c
	}
	return cmp.Compare(line, b.line)
}

// ---- matching ----

// lineMatcher finds the lines of a buffer that match a pattern. When the
// pattern requires one of a few literal strings, candidates are found with
// bytes.Index (vectorised) and only their lines go to the regexp engine;
// a pattern that is one literal needs no regexp at all.
type lineMatcher struct {
	line  *regexp.Regexp // matches one line (no newline in its input)
	multi *regexp.Regexp // the same in (?m) mode, to scan a whole buffer when there is no literal
	lits  []litFinder    // prefilter: every match contains one of these
	run   *classRun      // without literals: a run of byte classes every match contains
	fold  bool           // the literals are matched ignoring ASCII case
	exact bool           // finding a literal is a match: no regexp needed
	// anchored: the pattern starts with ^, so without a literal each line
	// is tried on its own.
	anchored bool
}

func compileLineMatcher(pattern string, ignoreCase bool) (*lineMatcher, error) {
	flags := ""
	if ignoreCase {
		flags = "(?i)"
	}
	line, err := regexp.Compile(flags + pattern)
	if err != nil {
		return nil, err
	}
	multi, err := regexp.Compile("(?m)" + flags + pattern)
	if err != nil {
		return nil, err
	}
	m := &lineMatcher{line: line, multi: multi}
	parsed, err := syntax.Parse(flags+pattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	parsed = parsed.Simplify()
	m.anchored = startsAtLineStart(parsed)
	if lits, fold, ok := requiredLiterals(parsed); ok {
		for _, l := range lits {
			if strings.IndexByte(l, '\n') >= 0 {
				// A line never contains a newline: a literal that needs
				// one can never match. Let the regexp say so.
				lits = nil
				break
			}
		}
		if len(lits) > 0 {
			m.fold = fold
			for _, l := range lits {
				m.lits = append(m.lits, newLitFinder(l, fold))
			}
			m.exact = isExactLiteral(parsed)
		}
	}
	if len(m.lits) == 0 && !m.anchored {
		m.run = requiredClassRun(parsed)
	}
	return m, nil
}

// startsAtLineStart reports whether every match of re begins at the
// start of the input (the line, when matching line by line).
func startsAtLineStart(re *syntax.Regexp) bool {
	for {
		switch re.Op {
		case syntax.OpBeginText, syntax.OpBeginLine:
			return true
		case syntax.OpConcat, syntax.OpCapture:
			if len(re.Sub) == 0 {
				return false
			}
			re = re.Sub[0]
		default:
			return false
		}
	}
}

// isExactLiteral reports whether re is one literal that the prefilter
// finds exactly: case-sensitive, or case-insensitive and made of ASCII
// characters that fold only to ASCII.
func isExactLiteral(re *syntax.Regexp) bool {
	if re.Op != syntax.OpLiteral {
		return false
	}
	if re.Flags&syntax.FoldCase == 0 {
		return true
	}
	for _, r := range re.Rune {
		if !asciiFoldSafe(r) {
			return false
		}
	}
	return true
}

// asciiFoldSafe reports whether r is ASCII and its case variants are all
// ASCII ('k' and 's' also fold to the Kelvin sign and the long s).
func asciiFoldSafe(r rune) bool {
	return r < utf8.RuneSelf && r != 'k' && r != 'K' && r != 's' && r != 'S'
}

// scan calls emit(start, end) for each matching line data[start:end]
// (without its newline), in order.
func (m *lineMatcher) scan(data []byte, emit func(start, end int)) {
	if len(m.lits) == 0 {
		if m.run != nil {
			m.scanRun(data, emit)
			return
		}
		m.scanRegexp(data, emit)
		return
	}
	var curBuf [maxPrefilterLiterals]litCursor
	cur := curBuf[:len(m.lits)]
	for i := range cur {
		cur[i] = litCursor{next: -2, lo: -2, up: -2}
	}
	pos := 0
	for pos < len(data) {
		c := -1
		for i := range m.lits {
			if cur[i].next == -1 {
				continue
			}
			if cur[i].next < pos {
				cur[i].next = m.lits[i].index(data, pos, &cur[i])
				if cur[i].next < 0 {
					continue
				}
			}
			if c < 0 || cur[i].next < c {
				c = cur[i].next
			}
		}
		if c < 0 {
			return
		}
		start, end := lineAround(data, pos, c)
		if m.exact || m.line.Match(data[start:end]) {
			emit(start, end)
		}
		pos = end + 1
	}
}

// litFinder finds one literal. It looks for the literal's rarest byte
// with bytes.IndexByte (vectorised) and compares the rest around each hit;
// ignoring ASCII case, it looks for both cases of that byte. A literal made
// only of very common bytes, matched with case, is left to bytes.Index.
type litFinder struct {
	lit    []byte // lowered when fold
	fold   bool
	byRare bool // look for the rare byte first; else bytes.Index
	rare   int  // index in lit of that byte
	lo, up byte // its two cases (equal for a non-letter or with case)
}

// litCursor remembers, during one scan, where a finder's next hits are.
type litCursor struct {
	next   int // next occurrence of the literal; -1 none, -2 not searched
	lo, up int // next occurrences of the rare byte's two cases
}

// commonRarity is the rarity below which a byte is too common to look for
// first (about the twenty most frequent bytes of source code).
const commonRarity = 20

func newLitFinder(lit string, fold bool) litFinder {
	f := litFinder{lit: []byte(lit), fold: fold}
	if fold {
		f.lit = []byte(strings.ToLower(lit))
	}
	best := -1
	for i, c := range f.lit {
		if r := byteRarity(c, fold); r > best {
			best, f.rare = r, i
		}
	}
	f.byRare = fold || best >= commonRarity
	f.lo = f.lit[f.rare]
	f.up = f.lo
	if fold && 'a' <= f.lo && f.lo <= 'z' {
		f.up = f.lo - ('a' - 'A')
	}
	return f
}

// index returns the position of the next occurrence of the literal in data
// at or after pos, or -1.
func (f *litFinder) index(data []byte, pos int, cur *litCursor) int {
	if !f.byRare {
		if j := bytes.Index(data[pos:], f.lit); j >= 0 {
			return pos + j
		}
		return -1
	}
	for {
		from := pos + f.rare
		if from >= len(data) {
			return -1
		}
		cur.lo = nextByte(data, from, f.lo, cur.lo)
		p := cur.lo
		if f.up != f.lo {
			cur.up = nextByte(data, from, f.up, cur.up)
			if p < 0 || (cur.up >= 0 && cur.up < p) {
				p = cur.up
			}
		}
		if p < 0 {
			return -1
		}
		start := p - f.rare
		if end := start + len(f.lit); end <= len(data) {
			if f.fold && equalFoldASCII(data[start:end], f.lit) || !f.fold && bytes.Equal(data[start:end], f.lit) {
				return start
			}
		}
		pos = start + 1
	}
}

// nextByte returns the next position of c at or after from, reusing the
// cached position prev when it is still ahead (-1: none left).
func nextByte(data []byte, from int, c byte, prev int) int {
	if prev == -1 || prev >= from {
		return prev
	}
	if j := bytes.IndexByte(data[from:], c); j >= 0 {
		return from + j
	}
	return -1
}

// equalFoldASCII reports whether s equals lower (already lowered) when
// ASCII letters of s are lowered.
func equalFoldASCII(s, lower []byte) bool {
	for i, c := range s {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// byteRarity estimates how rare a byte is in source code and text
// (higher is rarer), to pick the byte a literal search looks for first.
// Ignoring case, letters count as more common since both cases are looked
// for; with case, capitals are rarer than small letters.
func byteRarity(c byte, fold bool) int {
	const common = " e\ntarisonlcd\tpu.(m)f,_hg\"b=:y/;-x*0v{}1k>w'2<[]&3!+|q4j5z#%8769$\\?@^~`"
	upper := 'A' <= c && c <= 'Z'
	if upper {
		c += 'a' - 'A'
	}
	r := strings.IndexByte(common, c)
	if r < 0 {
		r = len(common)
	}
	switch {
	case fold && 'a' <= c && c <= 'z':
		r /= 2
	case upper:
		r += commonRarity
	}
	return r
}

// lineAround returns the bounds of the line of data holding position c
// (without its newline); no line starts before from.
func lineAround(data []byte, from, c int) (start, end int) {
	start = from + bytes.LastIndexByte(data[from:c], '\n') + 1
	end = c + bytes.IndexByte(data[c:], '\n')
	if end < c {
		end = len(data)
	}
	return start, end
}

// scanRun finds matching lines with the class-run prefilter: only the
// lines holding an occurrence of the run go to the regexp.
func (m *lineMatcher) scanRun(data []byte, emit func(start, end int)) {
	for pos := 0; pos < len(data); {
		c := m.run.index(data, pos)
		if c < 0 {
			return
		}
		start, end := lineAround(data, pos, c)
		if m.line.Match(data[start:end]) {
			emit(start, end)
		}
		pos = end + 1
	}
}

// scanRegexp finds matching lines without a prefilter. A pattern
// anchored at the start of the line is tried on each line (the engine
// fails fast there). Otherwise the (?m) regexp scans blocks of whole lines
// for the next position where a match could start, and the line holding it
// is checked on its own: a match in the block may span lines, but a line's
// own match is never missed since it is also a match of the block, at or
// after the position found. Blocks stay small because Go's regexp engine
// is much faster on short inputs.
func (m *lineMatcher) scanRegexp(data []byte, emit func(start, end int)) {
	if m.anchored {
		for start := 0; start < len(data); {
			end := start + bytes.IndexByte(data[start:], '\n')
			if end < start {
				end = len(data)
			}
			if m.line.Match(data[start:end]) {
				emit(start, end)
			}
			start = end + 1
		}
		return
	}
	for off := 0; off < len(data); {
		n := min(len(data)-off, regexpBlockBytes)
		if off+n < len(data) {
			if i := bytes.LastIndexByte(data[off:off+n], '\n'); i >= 0 {
				n = i + 1
			} else if j := bytes.IndexByte(data[off+n:], '\n'); j >= 0 {
				n += j + 1 // one long line
			} else {
				n = len(data) - off
			}
		}
		block := data[off : off+n]
		for pos := 0; pos < len(block); {
			loc := m.multi.FindIndex(block[pos:])
			if loc == nil {
				break
			}
			c := pos + loc[0]
			if c == len(block) && c > 0 && block[c-1] == '\n' {
				break // an empty match after the final newline is not a line
			}
			start, end := lineAround(block, pos, c)
			if m.line.Match(block[start:end]) {
				emit(off+start, off+end)
			}
			pos = end + 1
		}
		off += n
	}
}

// requiredLiterals returns strings one of which occurs in every match of
// re, and whether they must be searched case-insensitively (then they are
// ASCII). ok is false when no useful set exists.
func requiredLiterals(re *syntax.Regexp) (lits []string, fold bool, ok bool) {
	set := literalSet(re)
	if set == nil || set.minLen() == 0 {
		return nil, false, false
	}
	return set.lits, set.fold, true
}

// litSet is a set of alternatives, one of which every match contains.
type litSet struct {
	lits []string
	fold bool
}

func (s *litSet) minLen() int {
	n := -1
	for _, l := range s.lits {
		if n < 0 || len(l) < n {
			n = len(l)
		}
	}
	return max(n, 0)
}

// better reports whether s is a more selective prefilter than o.
func (s *litSet) better(o *litSet) bool {
	if o == nil {
		return true
	}
	sl, ol := s.minLen(), o.minLen()
	if sl != ol {
		return sl > ol
	}
	return len(s.lits) < len(o.lits)
}

func literalSet(re *syntax.Regexp) *litSet {
	switch re.Op {
	case syntax.OpLiteral:
		return literalRun(re.Rune, re.Flags&syntax.FoldCase != 0)
	case syntax.OpCapture, syntax.OpPlus:
		return literalSet(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return literalSet(re.Sub[0])
		}
		return nil
	case syntax.OpConcat:
		var best *litSet
		for _, sub := range re.Sub {
			if s := literalSet(sub); s != nil && s.minLen() > 0 && s.better(best) {
				best = s
			}
		}
		return best
	case syntax.OpAlternate:
		out := &litSet{}
		for i, sub := range re.Sub {
			s := literalSet(sub)
			if s == nil || s.minLen() == 0 {
				return nil
			}
			if i == 0 {
				out.fold = s.fold
			} else if s.fold != out.fold {
				// Mixed: search all ignoring case (a superset of candidates).
				out.fold = true
			}
			out.lits = append(out.lits, s.lits...)
			if len(out.lits) > maxPrefilterLiterals {
				return nil
			}
		}
		if out.fold {
			for _, l := range out.lits {
				for _, r := range l {
					if r >= utf8.RuneSelf {
						return nil // cannot lower non-ASCII safely
					}
				}
			}
		}
		return out
	}
	return nil
}

// literalRun makes a prefilter from a literal: the literal itself, or for
// a case-insensitive one its longest piece that ASCII lowering finds
// exactly.
func literalRun(runes []rune, fold bool) *litSet {
	if !fold {
		return &litSet{lits: []string{string(runes)}}
	}
	best, cur := "", []rune(nil)
	for _, r := range append(runes, utf8.RuneError) {
		if r != utf8.RuneError && asciiFoldSafe(r) {
			cur = append(cur, r)
			continue
		}
		if len(cur) > len(best) {
			best = string(cur)
		}
		cur = cur[:0]
	}
	if best == "" {
		return nil
	}
	return &litSet{lits: []string{strings.ToLower(best)}, fold: true}
}
