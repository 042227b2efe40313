package utility

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/maestro-run/maestro/internal/gitignore"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/workspace"
	"github.com/maestro-run/maestro/internal/workspace/index"
	"github.com/maestro-run/maestro/internal/workspace/walk"
)

// file_search limits (wire contract §10.2).
const (
	DefaultSearchLimit = 50
	MaxSearchLimit     = 500
)

// FileSearch answers utility_file_search: the files below cwd whose names
// best match the query (see the package documentation for the scoring).
func (m *Manager) FileSearch(ctx context.Context, req protocol.UtilityFileSearch) (protocol.UtilityFileSearchResults, error) {
	cwd, e := m.resolveDir(req.Cwd)
	if e != nil {
		return protocol.UtilityFileSearchResults{}, e
	}
	query := strings.TrimSpace(req.Query)
	limit := DefaultSearchLimit
	if req.Limit != nil {
		limit = min(max(1, *req.Limit), MaxSearchLimit)
	}
	res := protocol.UtilityFileSearchResults{
		SearchID: req.SearchID,
		Query:    query,
		Cwd:      cwd,
		Results:  []protocol.FileSearchResult{},
	}
	if query == "" {
		return res, nil
	}
	s := newSearch(ctx, m.root, m.relToRoot(cwd), query, limit)
	s.hidden = m.hidden
	matches, total, err := s.run()
	if err != nil {
		if ctx.Err() != nil {
			return protocol.UtilityFileSearchResults{}, errorf(400, "utility_file_search cancelled: %v", ctx.Err())
		}
		return protocol.UtilityFileSearchResults{}, errorf(400, "utility_file_search failed: %v", err)
	}
	res.Results = make([]protocol.FileSearchResult, len(matches))
	for i, mt := range matches {
		res.Results[i] = protocol.FileSearchResult{Path: mt.path, Score: float64(mt.score)}
	}
	res.Truncated = total > limit
	return res, nil
}

// ---- scoring ----

// scorer scores paths against one query. Its methods take lower-cased
// paths; it holds no per-call state and is shared by the workers.
type scorer struct {
	q      []byte   // the query, lower-cased
	qRunes []rune   // its characters
	tokens [][]byte // its whitespace-separated tokens, when there are several
	ascii  bool     // the query is ASCII
	slash  bool     // the query has a '/'
	// The query followed by, and after, the '/' that ends each name in
	// index.Dir.LowerNames (equalNamed, prefixed).
	qSep, sepQ string
	// index.CharMask of the query, of its first byte, and of the query
	// from each of its bytes on (restMask[len(q)] is 0).
	qMask, firstBit uint64
	restMask        []uint64
	// The index in tiers of the names that start with the query (and do
	// not equal it), when they make a tier of their own; else -1.
	prefixTier int
	// The distinct values of tier, best first: a file's bound by the rule
	// its base name meets (equal, starts with, contains, none).
	tiers []int
}

func newScorer(query string) *scorer {
	lq := strings.ToLower(query)
	s := &scorer{q: []byte(lq), qRunes: []rune(lq), ascii: isASCII([]byte(lq)), slash: strings.Contains(lq, "/"),
		qSep: lq + "/", sepQ: "/" + lq}
	s.restMask = make([]uint64, len(lq)+1)
	for i := len(lq) - 1; i >= 0; i-- {
		s.restMask[i] = s.restMask[i+1] | index.CharMask(lq[i:i+1])
	}
	s.qMask = s.restMask[0]
	if lq != "" {
		s.firstBit = index.CharMask(lq[:1])
	}
	s.prefixTier = -1
	if s.slash {
		s.tiers = []int{max(10000, s.belowBase())}
	} else {
		for _, t := range []int{10000, 8000, 7000, 0} {
			if t = max(t, s.belowBase()); !slices.Contains(s.tiers, t) {
				s.tiers = append(s.tiers, t)
			}
		}
	}
	if len(s.tiers) == 4 {
		s.prefixTier = 1
	}
	if fields := strings.Fields(lq); len(fields) > 1 {
		for _, f := range fields {
			s.tokens = append(s.tokens, []byte(f))
		}
	}
	return s
}

// score scores one file. path is the lower-cased path relative to the
// search directory, base its last element (a suffix of path), and
// pathLen the length of the path as given, in UTF-16 code units.
func (s *scorer) score(path, base []byte, pathLen int) int {
	return s.scoreFrom(path, base, pathLen, 1, false)
}

// scoreFrom is score for a file that matters only if it scores at least
// floor (≥ 1): it returns 0 as soon as the rules left cannot reach floor,
// so that a search whose top matches are settled skips the costly rules
// (the scores it returns are score's). isSub says the query is known to
// be a subsequence of path (a single ASCII token: see prefixMatched).
func (s *scorer) scoreFrom(path, base []byte, pathLen, floor int, isSub bool) int {
	// Most files match nothing: a query that is not even a subsequence of
	// the path can only match through its tokens.
	if s.tokens == nil && !isSub && !s.isSubsequence(path) {
		return 0
	}
	reach := func(rule int) bool { return rule-pathLen >= floor }
	q := s.q
	if !reach(10000) {
		return 0
	}
	switch {
	case string(base) == string(q):
		return 10000 - pathLen
	case string(path) == string(q):
		return 9500 - pathLen
	case !reach(8000):
		return 0
	case bytes.HasPrefix(base, q):
		return 8000 - pathLen
	case !reach(7000):
		return 0
	}
	if i := bytes.Index(base, q); i >= 0 {
		return 7000 - 10*utf16Len(base[:i]) - pathLen
	}
	if !reach(s.belowBase()) {
		return 0
	}
	if i := bytes.Index(path, q); i >= 0 {
		return 6000 - 10*utf16Len(path[:i]) - pathLen
	}
	if s.tokens != nil {
		all := true
		for _, t := range s.tokens {
			// The base name is part of the path.
			if bytes.Index(path, t) < 0 {
				all = false
				break
			}
		}
		if all {
			return 5000 - pathLen
		}
	}
	if !reach(s.subBound(3000)) {
		return 0
	}
	if sub := s.subsequence(base); sub > 0 {
		return 3000 + sub - pathLen
	}
	if sub := s.subsequence(path); sub > 0 {
		return 2000 + sub - pathLen
	}
	return 0
}

// subBound is the most a subsequence rule scoring rule + s can give
// before the path's length is taken off (s is at most 12 per character).
func (s *scorer) subBound(rule int) int { return rule + 12*len(s.qRunes) }

// tierOf returns the tier of a file of lower-cased base name base (its
// index in s.tiers): the rule it can meet, best first (its base name
// equals the query, starts with it, contains it, none of these); the most
// the file can score plus its path's length is s.tiers[tierOf(base)].
func (s *scorer) tierOf(base string) int {
	if len(s.tiers) == 1 {
		return 0
	}
	q := string(s.q)
	var t int
	switch {
	case base == q:
		return 0
	case strings.HasPrefix(base, q):
		t = 8000
	case strings.Contains(base, q):
		t = 7000
	default:
		return len(s.tiers) - 1
	}
	return slices.Index(s.tiers, max(t, s.belowBase()))
}

// indexBound is the most a file of directory d of the index can score,
// plus the length of its path, from the characters of d's names alone; 0
// when none of its files can match (the directory's lower-cased prefix
// matched the query's first matched characters: prefixMatched). It may be
// more than the files reach, never less.
func (s *scorer) indexBound(d *index.Dir, matched int) int {
	chars := d.NameChars()
	switch {
	case chars == 0:
		return 0 // no file
	case matched >= 0 && s.restMask[matched]&^chars != 0:
		return 0 // the rest of the query is not a subsequence of any name
	case s.slash:
		return s.tiers[0]
	case s.qMask&^chars != 0:
		return s.belowBase() // no name holds the query
	case s.firstBit&d.FirstChars() != 0:
		return s.tiers[0] // a name may equal the query
	}
	return max(7000, s.belowBase()) // a name may contain the query
}

// continueMatch returns prefixMatched of a directory prefix followed by
// name and '/', given matched, that of the prefix: greedy matching goes
// on where it stopped.
func (s *scorer) continueMatch(matched int, name string) int {
	if matched < 0 {
		return matched
	}
	for i := 0; i < len(name) && matched < len(s.q); i++ {
		c := name[i]
		if c >= 0x80 {
			// Lower-casing beyond ASCII may give ASCII (the Kelvin sign
			// gives 'k'): match the rest lower-cased as the index does.
			return s.matchLower(matched, strings.ToLower(name[i:])+"/")
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c == s.q[matched] {
			matched++
		}
	}
	return s.matchLower(matched, "/")
}

// matchLower goes on matching the query greedily in lower.
func (s *scorer) matchLower(matched int, lower string) int {
	for i := 0; i < len(lower) && matched < len(s.q); i++ {
		if lower[i] == s.q[matched] {
			matched++
		}
	}
	return matched
}

// belowBase is the most a file whose base name neither equals, starts
// with nor contains the query can score, plus its path's length.
func (s *scorer) belowBase() int { return max(6000, s.subBound(3000)) }

// below reports whether a file surely scores less than floor, judged
// from its lower-cased base name and its path's length alone (so that
// most files of a search whose top matches are settled are dropped
// before their path is looked at); false when it cannot tell.
func (s *scorer) below(base string, pathLen, floor int) bool {
	q := string(s.q)
	switch {
	case 10000-pathLen < floor:
		return true
	case base == q || s.slash && 9500-pathLen >= floor:
		// The base or the path may equal the query (without a '/' in
		// the query, the path equals it only when the base does).
		return false
	case strings.HasPrefix(base, q):
		return 8000-pathLen < floor
	case 7000-pathLen < floor:
		return max(7000, s.belowBase())-pathLen < floor
	}
	return false
}

// isSubsequence reports whether the query's characters appear in h in
// order.
func (s *scorer) isSubsequence(h []byte) bool {
	if s.ascii {
		at := 0
		for _, c := range s.q {
			i := bytes.IndexByte(h[at:], c)
			if i < 0 {
				return false
			}
			at += i + 1
		}
		return true
	}
	return s.subsequence(h) > 0
}

// prefixMatched returns how many of the query's characters the directory
// prefix of a path (lower-cased) holds in order, matched greedily; -1 when
// that does not decide whether the query is a subsequence of the path
// (a query of several tokens or not ASCII). Greedy matching finds a
// subsequence whenever there is one, so the query is a subsequence of the
// path exactly when the rest of it is one of the file name.
func (s *scorer) prefixMatched(prefix []byte) int {
	if !s.ascii || s.tokens != nil {
		return -1
	}
	k := 0
	for at := 0; k < len(s.q); k++ {
		i := bytes.IndexByte(prefix[at:], s.q[k])
		if i < 0 {
			break
		}
		at += i + 1
	}
	return k
}

// nameHasRest is restIsSubsequence for a single name: a byte loop, which
// on names of a few dozen bytes costs less than a call to IndexByte per
// character of the query.
func (s *scorer) nameHasRest(name string, k int) bool {
	q := s.q[k:]
	if len(q) == 0 {
		return true
	}
	if len(q) > len(name) {
		return false
	}
	j := 0
	for i := 0; i < len(name); i++ {
		if name[i] == q[j] {
			if j++; j == len(q) {
				return true
			}
		}
	}
	return false
}

// restIsSubsequence reports whether the query's characters from the k-th
// on appear in name in order (k from prefixMatched).
func (s *scorer) restIsSubsequence(name string, k int) bool {
	at := 0
	for _, c := range s.q[k:] {
		i := strings.IndexByte(name[at:], c)
		if i < 0 {
			return false
		}
		at += i + 1
	}
	return true
}

// subsequence scores the query as a subsequence of h: for each character,
// 12 minus the characters skipped before it (at most 10); 0 when the query
// is not a subsequence, else at least 1.
func (s *scorer) subsequence(h []byte) int {
	at, score := 0, 0
	if s.ascii {
		for _, c := range s.q {
			i := bytes.IndexByte(h[at:], c)
			if i < 0 {
				return 0
			}
			score += 12 - min(10, i)
			at += i + 1
		}
		return max(score, 1)
	}
	var enc [4]byte
	for _, r := range s.qRunes {
		n := utf8.EncodeRune(enc[:], r)
		i := bytes.Index(h[at:], enc[:n])
		if i < 0 {
			return 0
		}
		score += 12 - min(10, utf8.RuneCount(h[at:at+i]))
		at += i + n
	}
	return max(score, 1)
}

// sep ends each name in index.Dir.LowerNames.
const sep = '/'

// ---- the walk ----

// match is one scored file.
type match struct {
	path  string
	score int
	len   int // path length in UTF-16 code units
}

func compareMatch(a, b match) int {
	if c := cmp.Compare(b.score, a.score); c != 0 {
		return c
	}
	if c := cmp.Compare(a.len, b.len); c != 0 {
		return c
	}
	return strings.Compare(a.path, b.path)
}

// search is one file search.
type search struct {
	ctx    context.Context
	root   *workspace.Root
	base   string // search directory relative to the workspace root, slash-separated
	limit  int
	scorer *scorer
	// hidden, when set, reports directories never searched (root-relative).
	hidden func(rel string) bool

	mu    sync.Mutex
	total int
	best  *walk.Best[match]
}

func newSearch(ctx context.Context, root *workspace.Root, base, query string, limit int) *search {
	return &search{ctx: ctx, root: root, base: base, limit: limit, scorer: newScorer(query),
		best: walk.NewBest(limit, compareMatch)}
}

// run scores the files of the workspace index, or walks the tree when the
// search directory is not indexed (it is ignored), and returns the best
// matches, sorted, and how many files matched in all.
func (s *search) run() ([]match, int, error) {
	ok, err := index.Of(s.root).Read(s.ctx, s.base, func(d *index.Dir) {
		// One worker: its matches are the search's.
		w := s.newWorker()
		w.fromIndex(d)
		s.best, s.total = w.best, w.total
	})
	switch {
	case err == nil && ok:
		if err := s.ctx.Err(); err != nil {
			return nil, 0, err
		}
		return s.best.Sort(), s.total, nil
	case err != nil && !errors.Is(err, index.ErrClosed):
		return nil, 0, err
	}
	err = walk.Walk(s.ctx, s.root, s.base, func() walk.Worker {
		return s.newWorker()
	})
	if err != nil {
		return nil, 0, err
	}
	return s.best.Sort(), s.total, nil
}

func (s *search) newWorker() *searchWorker {
	return &searchWorker{s: s, best: walk.NewBest(s.limit, compareMatch)}
}

// searchWorker holds one worker's buffers and its best matches.
type searchWorker struct {
	s     *search
	path  []byte // root-relative path of the entry being looked at
	lower []byte // its search-relative part, lower-cased
	best  *walk.Best[match]
	total int
	chunk []byte // where keep copies paths

	// Set by enter for the directory being looked at.
	relStart    int // where the search-relative part of path starts
	dirLen      int // length of its prefix in path
	lowerDirLen int // and in lower
	dirUTF16    int // its search-relative prefix's length in UTF-16 code units
	dirMatched  int // scorer.prefixMatched of the lower-cased prefix
}

// List scores the files of d and queues its subdirectories; unreadable
// directories are skipped, as rg does.
func (w *searchWorker) List(d *walk.Dir, entries []fs.DirEntry, rules *gitignore.Stack, _ error) []walk.Task {
	if d == nil {
		return nil
	}
	w.enter(d.Rel())
	var tasks []walk.Task
	for _, e := range entries {
		name := e.Name()
		if name[0] == '.' {
			continue // hidden, .git included
		}
		typ := e.Type()
		switch {
		case typ.IsDir():
			if w.skipDir(name) {
				continue
			}
			if rules != nil && rules.Match(string(append(w.path[:w.dirLen], name...)), true) {
				continue
			}
			tasks = append(tasks, walk.Task{Name: name, IsDir: true, Rules: rules})
		case typ.IsRegular():
			w.path = append(w.path[:w.dirLen], name...)
			// Match does not keep its argument, so it may look at the
			// buffer without a copy.
			if rules != nil && rules.Match(unsafe.String(unsafe.SliceData(w.path), len(w.path)), false) {
				continue
			}
			w.file(name)
		}
		// Symbolic links, devices, pipes and sockets are skipped.
	}
	return tasks
}

// enter makes dirRel (root-relative) the directory whose files are
// scored next: w.path is set to its root-relative prefix and w.lower to
// the search-relative part of it, lower-cased, once per directory.
func (w *searchWorker) enter(dirRel string) {
	w.path = w.path[:0]
	if dirRel != "." {
		w.path = append(append(w.path, dirRel...), '/')
	}
	w.relStart = 0
	if w.s.base != "." {
		w.relStart = min(len(w.s.base)+1, len(w.path))
	}
	w.lower = appendLower(w.lower[:0], w.path[w.relStart:])
	w.dirLen = len(w.path)
	w.lowerDirLen = len(w.lower)
	w.dirUTF16 = utf16Len(w.path[w.relStart:])
	w.dirMatched = w.s.scorer.prefixMatched(w.lower)
}

// skipDir reports whether the subdirectory name of the entered
// directory is Maestro's own state (Config.Hide), never searched.
func (w *searchWorker) skipDir(name string) bool {
	if w.s.hidden == nil {
		return false
	}
	w.path = append(w.path[:w.dirLen], name...)
	// hidden does not keep its argument, so it may look at the buffer.
	return w.s.hidden(unsafe.String(unsafe.SliceData(w.path), len(w.path)))
}

// file scores the file name of the entered directory (not ignored).
func (w *searchWorker) file(name string) {
	w.lower = appendLower(w.lower[:w.lowerDirLen], name)
	lower := w.lower[w.lowerDirLen:]
	if w.dirMatched >= 0 && !w.s.scorer.nameHasRest(unsafe.String(unsafe.SliceData(lower), len(lower)), w.dirMatched) {
		return // most files: the query is not even a subsequence of the path
	}
	w.score(name)
}

// fileLower is file for a name whose lower-cased form is known (the
// index keeps it).
// The caller has checked that the query is a subsequence of the path
// when it can tell (dirMatched ≥ 0).
func (w *searchWorker) fileLower(name, lower string) {
	if floor := w.floor(); floor > 1 && w.s.scorer.below(lower, w.dirUTF16+utf16Len(name), floor) {
		return
	}
	w.lower = append(w.lower[:w.lowerDirLen], lower...)
	w.score(name)
}

// score scores a file of the entered directory whose lower-cased name is
// in w.lower.
func (w *searchWorker) score(name string) {
	n := w.dirUTF16 + utf16Len(name)
	if sc := w.s.scorer.scoreFrom(w.lower, w.lower[w.lowerDirLen:], n, w.floor(), w.dirMatched >= 0); sc > 0 {
		w.path = append(w.path[:w.dirLen], name...)
		w.add(sc, w.path[w.relStart:], n)
	}
}

// floor is the least score a file must reach to change the outcome: 1
// (any match) until more files matched than the limit; from then on the
// result is truncated whatever follows, so the count no longer matters
// and only a file scoring at least the worst match kept can still be
// kept (a tie may win on length or path). A worker keeps the best of its
// own files, so its floor is never above the search's.
func (w *searchWorker) floor() int {
	if w.total <= w.s.limit {
		return 1
	}
	return max(1, w.best.Worst().score)
}

// fromIndex scores the files of the workspace index (internal/workspace/
// index) below d, skipping hidden entries and Maestro's own state as List
// does; the index has left out what .gitignore files ignore.
//
// The directories are first listed breadth-first, each with the most one
// of its files can score (its bound, from the characters its names hold:
// index.Dir.NameChars and FirstChars, without reading the names in most
// cases); those whose names cannot hold the rest of the query are
// dropped. The files are then scored by rule, best first (scorer.tiers:
// names equal to the query, then those starting with it, containing it,
// and the others), each pass breadth-first (shallow paths score higher):
// the best matches are met first, so that for a query many files match
// the worst match kept soon rises above what the later passes can reach,
// and most of their directories are skipped whole, from their bound.
func (w *searchWorker) fromIndex(top *index.Dir) {
	sc := w.s.scorer
	w.enter(top.Rel())
	var dirs []indexDir
	if p, ok := indexDirs.Get().(*[]indexDir); ok {
		dirs = *p
	}
	defer func() {
		clear(dirs)
		dirs = dirs[:0]
		indexDirs.Put(&dirs)
	}()
	dirs = append(dirs, indexDir{d: top, pathLen: int32(w.dirUTF16), matched: int32(w.dirMatched)})
	for i := 0; i < len(dirs); i++ {
		it := &dirs[i]
		it.bound = int32(sc.indexBound(it.d, int(it.matched)))
		for _, sub := range it.d.Dirs() {
			name := sub.Name()
			if name[0] == '.' || w.skipDir(name) {
				continue
			}
			dirs = append(dirs, indexDir{d: sub, pathLen: it.pathLen + int32(utf16Len(name)) + 1,
				matched: int32(sc.continueMatch(int(it.matched), name))})
			it = &dirs[i] // dirs may have grown
		}
	}
	for t, tier := range sc.tiers {
		for i := range dirs {
			it := &dirs[i]
			if int(it.bound) < tier {
				continue // none of its files reaches the tier
			}
			if w.s.ctx.Err() != nil {
				return
			}
			// Each path is at least one character longer than its
			// directory's prefix.
			if floor := w.floor(); floor > 1 && tier-int(it.pathLen+1) < floor {
				continue
			}
			if !it.visited {
				it.visited = true
				if it.matched >= 0 && !sc.restIsSubsequence(it.d.LowerNames(), int(it.matched)) {
					it.bound = 0
					continue
				}
			}
			if it.scanned && it.later&(1<<t) == 0 {
				continue // none of its files is of this tier
			}
			w.enter(it.d.Rel())
			if !it.scanned && t <= sc.prefixTier {
				// The names equal to the query, then those starting with
				// it: found by looking for the query in the names, which
				// most names do not hold where these rules need it.
				if files, lower, ok := it.d.PackedNames(); ok {
					if !sc.mayHold(it.d.FileMasks(), t == 0) {
						continue
					}
					if t == 0 {
						w.equalNamed(files, lower)
					} else {
						w.prefixed(files, lower)
					}
					continue
				}
			}
			later := w.scanFiles(it.d, int(it.matched), t)
			if !it.scanned {
				it.later, it.scanned = later, true
			}
		}
	}
}

// prefixed scores the files of the entered directory whose names start
// with the query (and do not equal it), from the directory's packed
// names and their lower-cased form, aligned (index.Dir.PackedNames):
// most of a directory's names do not, and are passed over by looking for
// the query after each separator.
func (w *searchWorker) prefixed(files, lower string) {
	sc := w.s.scorer
	q := string(sc.q)
	for at := 0; at < len(lower); {
		i := at
		if at > 0 || !strings.HasPrefix(lower, q) {
			j := strings.Index(lower[at:], sc.sepQ)
			if j < 0 {
				return
			}
			i = at + j + 1
		}
		end := i + strings.IndexByte(lower[i:], sep)
		at = end
		if name := files[i:end]; name[0] != '.' && end-i != len(q) {
			w.fileLower(name, lower[i:end])
		}
	}
}

// scanFiles scores the files of the entered directory d (its prefix
// matched the query's first matched characters) that are of tier t, and
// returns the set of the later tiers its other files are of. With the
// names' FileMasks, names that lack a character the query needs are
// passed over by their mask and length alone.
func (w *searchWorker) scanFiles(d *index.Dir, matched, t int) (later uint8) {
	sc := w.s.scorer
	look := func(name, lower string) {
		if name[0] == '.' || matched >= 0 && !sc.nameHasRest(lower, matched) {
			return
		}
		switch ft := sc.tierOf(lower); {
		case ft == t:
			w.fileLower(name, lower)
		case ft > t:
			later |= 1 << ft
		}
		// Files of a better tier were scored by an earlier pass, or
		// could not reach the worst match kept.
	}
	masks := d.FileMasks()
	files, lower, aligned := d.PackedNames()
	if masks == nil || !aligned { // not known yet, or lower-cased names moved
		for name, lower := range d.FilesLower() {
			look(name, lower)
		}
		return later
	}
	// The characters a name must hold (none when the query need not be a
	// subsequence of the name: several tokens, not ASCII).
	var need uint32
	if matched >= 0 {
		need = index.FoldMask(sc.restMask[matched])
	}
	at := 0
	for _, m := range masks {
		n := index.MaskLen(m)
		if n < 0 {
			n = strings.IndexByte(files[at:], sep)
		}
		i := at
		at += n + 1
		if need&^m == 0 {
			look(files[i:i+n], lower[i:i+n])
		}
	}
	return later
}

// mayHold reports whether one of the names that masks describe
// (index.Dir.FileMasks, nil when not known) may equal the query (equal)
// or be longer and hold it, judged by their masks and lengths alone.
func (s *scorer) mayHold(masks []uint32, equal bool) bool {
	if masks == nil {
		return true
	}
	need := index.FoldMask(s.qMask)
	for _, m := range masks {
		if need&^m != 0 {
			continue
		}
		switch n := index.MaskLen(m); {
		case n < 0 || n == len(s.q) && equal || n > len(s.q) && !equal:
			return true
		}
	}
	return false
}

// equalNamed scores the file of the entered directory whose name equals
// the query, if any (files and lower as for prefixed): only a name that
// ends with the query can.
func (w *searchWorker) equalNamed(files, lower string) {
	sc := w.s.scorer
	for at := 0; ; {
		i := strings.Index(lower[at:], sc.qSep)
		if i < 0 {
			return
		}
		if i += at; i == 0 || lower[i-1] == sep {
			end := i + len(sc.q)
			if name := files[i:end]; name[0] != '.' {
				w.fileLower(name, lower[i:end])
			}
			return // names are unique
		}
		at = i + 1
	}
}

// indexDir is a directory of the index to score (fromIndex).
type indexDir struct {
	d       *index.Dir
	pathLen int32 // length of its search-relative prefix (with its '/') in UTF-16 code units
	matched int32 // scorer.prefixMatched of its lower-cased prefix
	bound   int32 // scorer.indexBound: 0 when none of its files can match
	visited bool  // its names were found to hold the rest of the query
	scanned bool  // a pass looked at each of its files, finding later
	later   uint8 // the tiers (indices in scorer.tiers) of its files after that pass
}

// indexDirs keeps fromIndex's lists of directories for the next search
// (a thousand directories take some 30 kB).
var indexDirs sync.Pool

// File implements walk.Worker: files are scored as their directory is
// listed, never queued.
func (w *searchWorker) File(walk.Task) {}

// add records a matching file (path relative to the search directory).
func (w *searchWorker) add(score int, path []byte, n int) {
	w.total++
	cand := match{score: score, len: n, path: unsafe.String(unsafe.SliceData(path), len(path))}
	if !w.best.Admits(cand) {
		return
	}
	cand.path = w.keep(path)
	w.best.Offer(cand)
}

// pathChunk is the size of the buffers that kept paths are copied into.
const pathChunk = 4096

// keep returns a string holding path's bytes. A search for a query most
// files match keeps thousands of paths and drops most of them again, so
// they are copied into shared chunks, each never written again where a
// string points, rather than allocated one by one.
func (w *searchWorker) keep(path []byte) string {
	if cap(w.chunk)-len(w.chunk) < len(path) {
		w.chunk = make([]byte, 0, max(pathChunk, len(path)))
	}
	at := len(w.chunk)
	w.chunk = append(w.chunk, path...)
	return unsafe.String(unsafe.SliceData(w.chunk[at:]), len(path))
}

// Done merges the worker's matches into the search's.
func (w *searchWorker) Done() {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total += w.total
	for _, mt := range w.best.All() {
		s.best.Offer(mt)
	}
}

// ---- byte helpers ----

// utf16Len returns the length of UTF-8 text b in UTF-16 code units (the
// length JavaScript reports).
func utf16Len[T ~string | ~[]byte](b T) int {
	n := 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c < 0x80 || c >= 0xC0 && c < 0xF0:
			n++ // ASCII, or the lead byte of a 2- or 3-byte sequence
		case c >= 0xF0:
			n += 2 // lead byte of a 4-byte sequence: a surrogate pair
		}
	}
	return n
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// appendLower appends b lower-cased to dst.
func appendLower[T ~string | ~[]byte](dst []byte, b T) []byte {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c >= 0x80 {
			return append(dst, strings.ToLower(string(b[i:]))...)
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}
