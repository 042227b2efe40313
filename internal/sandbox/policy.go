package sandbox

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// policy is what a command is checked against before it runs.
type policy struct {
	// allow, when set, is the command allowlist in force.
	allow *allowlist
	// scope, when set, confines path arguments to the workspace (fallback).
	scope *workspace
}

// maxNesting bounds how deep nested shell code (bash -c '…', eval) is
// parsed.
const maxNesting = 8

// check parses the command and applies the rules, returning the first
// violation.
func (p *policy) check(command string) *PolicyError {
	c := &checker{policy: p, funcs: map[string]bool{}, vars: map[string]string{}}
	return c.script(command, 0)
}

func reject(format string, args ...any) *PolicyError {
	return &PolicyError{Reason: fmt.Sprintf(format, args...)}
}

// checker carries the state of one check.
type checker struct {
	*policy
	funcs map[string]bool   // functions the script defines
	vars  map[string]string // variables the script sets to a literal value
}

// script checks a piece of shell code.
func (c *checker) script(src string, depth int) *PolicyError {
	if depth > maxNesting {
		return reject("shell code is nested too deeply to be checked; write the commands out directly")
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return reject("the command could not be parsed as bash (%v); fix or simplify it", err)
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		if fd, ok := n.(*syntax.FuncDecl); ok && fd.Name != nil {
			c.funcs[fd.Name.Value] = true
		}
		return true
	})
	var perr *PolicyError
	syntax.Walk(f, func(n syntax.Node) bool {
		if perr == nil {
			perr = c.node(n, depth)
		}
		return perr == nil
	})
	return perr
}

// node checks one syntax node; syntax.Walk visits all of them, including
// those inside substitutions, subshells, functions and conditionals.
func (c *checker) node(n syntax.Node, depth int) *PolicyError {
	switch n := n.(type) {
	case *syntax.CallExpr:
		for _, a := range n.Assigns {
			if err := c.assign(a); err != nil {
				return err
			}
			c.remember(a, len(n.Args) == 0)
		}
		if len(n.Args) > 0 {
			return c.argv(newWords(n.Args), depth)
		}
	case *syntax.DeclClause:
		return c.decl(n)
	case *syntax.WordIter:
		if c.allow != nil && n.Name != nil && deniedVariable(n.Name.Value) {
			return rejectVariable(n.Name.Value)
		}
	case *syntax.Redirect:
		return c.redirect(n)
	case *syntax.BinaryCmd:
		if n.Op == syntax.Pipe || n.Op == syntax.PipeAll {
			return c.pipeline(n, depth)
		}
	case *syntax.Stmt:
		return c.stmt(n, depth)
	case *syntax.ParamExp:
		if c.allow != nil && n.Exp != nil && n.Exp.Op == syntax.OtherParamOps &&
			n.Exp.Word != nil && strings.Contains(n.Exp.Word.Lit(), "P") {
			return reject("`${var@P}` expands a prompt string, which can run commands the sandbox cannot check")
		}
	}
	return nil
}

// remember records a variable set to a literal (p=pip), so that a command
// named by it ($p install) is checked as written out. Any other assignment
// forgets the variable.
func (c *checker) remember(a *syntax.Assign, standalone bool) {
	if a.Name == nil {
		return
	}
	if a.Value != nil && standalone && !a.Append && a.Index == nil {
		if w := newWord(a.Value); w.static {
			c.vars[a.Name.Value] = w.value
			return
		}
	}
	delete(c.vars, a.Name.Value)
}

// resolveName returns the literal a command name like $p, ${p} or "$p"
// stands for, when the script set p to a literal.
func (c *checker) resolveName(w word) (word, bool) {
	if w.static || w.node == nil || len(w.node.Parts) != 1 {
		return w, false
	}
	part := w.node.Parts[0]
	if dq, ok := part.(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
		part = dq.Parts[0]
	}
	pe, ok := part.(*syntax.ParamExp)
	if !ok || pe.Param == nil || pe.Excl || pe.Length || pe.Width || pe.Index != nil ||
		pe.Slice != nil || pe.Repl != nil || pe.Names != 0 || pe.Exp != nil {
		return w, false
	}
	v, ok := c.vars[pe.Param.Value]
	if !ok {
		return w, false
	}
	return literal(v), true
}

// argv checks one simple command (and, recursively, the commands it runs).
func (c *checker) argv(ws []word, depth int) *PolicyError {
	if resolved, ok := c.resolveName(ws[0]); ok {
		ws = append([]word{resolved}, ws[1:]...)
	}
	name := ws[0]
	if !name.static {
		if c.allow != nil {
			return reject("the command name `%s` is computed when the command runs, so the sandbox cannot check it; write the command name literally", name.source())
		}
		return nil
	}
	base := path.Base(name.value)
	args := ws[1:]
	if reason := alwaysRule(base, args); reason != "" {
		return reject("%s", reason)
	}
	if c.allow != nil {
		if err := c.allowed(name.value, args); err != nil {
			return err
		}
	}
	if err := c.nestedCode(base, args, depth); err != nil {
		return err
	}
	nested, own := splitWrapper(base, args)
	if c.scope != nil {
		for _, w := range pathOperands(base, own) {
			if err := c.strict(w); err != nil {
				return err
			}
		}
	}
	for _, inner := range nested {
		if len(inner) == 0 {
			continue
		}
		if err := c.argv(inner, depth); err != nil {
			return err
		}
	}
	return nil
}

// allowed applies the allowlist to a command name and its arguments.
func (c *checker) allowed(name string, args []word) *PolicyError {
	if strings.Contains(name, "/") {
		return reject("`%s` is a path; run commands by name (allowed commands: %s)", name, c.allow.describe())
	}
	if c.funcs[name] {
		return nil // the function's body is checked where it is defined
	}
	if reason, ok := forbiddenBuiltins[name]; ok {
		return reject("%s", reason)
	}
	if safeBuiltins[name] {
		return c.builtinArgs(name, args)
	}
	if !c.allow.has(name) {
		return reject("`%s` is not an allowed command here. Allowed commands: %s", name, c.allow.describe())
	}
	if name == "env" {
		for _, a := range args {
			if !a.static || a.isOption() {
				continue
			}
			k, _, ok := strings.Cut(a.value, "=")
			if !ok || !isName(k) {
				break
			}
			if deniedVariable(k) {
				return rejectVariable(k)
			}
		}
	}
	if subs := c.allow.subcommands(name); subs != nil {
		sub, ok := subcommand(name, args)
		if !ok || !slices.Contains(subs, sub) {
			return reject("only these `%s` subcommands are allowed: %s", name, strings.Join(subs, ", "))
		}
	}
	if reason := dangerousOption(name, args); reason != "" {
		return reject("%s", reason)
	}
	return nil
}

// builtinArgs checks builtins that assign variables named by arguments.
func (c *checker) builtinArgs(name string, args []word) *PolicyError {
	var names []word
	switch name {
	case "read", "mapfile", "readarray", "getopts":
		valued := map[string]bool{"-d": true, "-p": true, "-n": true, "-N": true, "-t": true,
			"-u": true, "-i": true, "-C": true, "-c": true, "-O": true, "-s": true}
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case a.static && a.value == "-a" && i+1 < len(args):
				names = append(names, args[i+1])
				i++
			case a.static && valued[a.value]:
				i++
			case a.isOption():
			default:
				names = append(names, a)
			}
		}
	case "printf":
		if len(args) > 1 && args[0].static && args[0].value == "-v" {
			names = append(names, args[1])
		}
	}
	for _, n := range names {
		if !n.static {
			return reject("`%s` assigns to a variable whose name is computed at run time, which the sandbox cannot check", name)
		}
		v, _, _ := strings.Cut(n.value, "[")
		if deniedVariable(v) {
			return rejectVariable(v)
		}
	}
	return nil
}

// nestedCode checks shell code passed as an argument: bash -c '…' and
// eval '…'.
func (c *checker) nestedCode(base string, args []word, depth int) *PolicyError {
	switch {
	case shells[base]:
		code, ok := shellCode(args)
		if !ok {
			return nil
		}
		if !code.static {
			if c.allow != nil {
				return reject("`%s -c` runs code computed at run time, which the sandbox cannot check", base)
			}
			return nil
		}
		return c.script(code.value, depth+1)
	case base == "eval":
		parts := make([]string, 0, len(args))
		for _, a := range args {
			if !a.static {
				return nil // rejected by the allowlist when one is in force
			}
			parts = append(parts, a.value)
		}
		return c.script(strings.Join(parts, " "), depth+1)
	}
	return nil
}

// stmt checks a statement as a whole: an interpreter fed by a download
// through a substitution, and shells reading a here-document.
func (c *checker) stmt(s *syntax.Stmt, depth int) *PolicyError {
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 {
		return nil
	}
	interp, stdinShell := "", false
	for _, av := range effectiveArgvs(newWords(call.Args)) {
		n := path.Base(av[0].value)
		if isInterpreter(n) || n == "source" || n == "." || n == "eval" {
			interp = n
			if shells[n] && readsStdin(av[1:]) {
				stdinShell = true
			}
		}
	}
	if interp == "" {
		return nil
	}
	var downloader string
	syntax.Walk(s, func(n syntax.Node) bool {
		if ce, ok := n.(*syntax.CallExpr); ok && ce != call && len(ce.Args) > 0 {
			for _, av := range effectiveArgvs(newWords(ce.Args)) {
				if d := path.Base(av[0].value); downloaders[d] {
					downloader = d
				}
			}
		}
		return downloader == ""
	})
	if downloader != "" {
		return rejectDownloadRun(downloader, interp)
	}
	if !stdinShell {
		return nil
	}
	for _, r := range s.Redirs {
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			if r.Hdoc != nil {
				if err := c.script(heredocText(r.Hdoc), depth+1); err != nil {
					return err
				}
			}
		case syntax.WordHdoc:
			if w := newWord(r.Word); w.static {
				if err := c.script(w.value, depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// pipeline rejects downloads piped into interpreters and checks text
// echoed into a shell.
func (c *checker) pipeline(b *syntax.BinaryCmd, depth int) *PolicyError {
	stages := flattenPipe(&syntax.Stmt{Cmd: b})
	downloader := ""
	var echoed *string
	for _, st := range stages {
		var argvs [][]word
		syntax.Walk(st, func(n syntax.Node) bool {
			if ce, ok := n.(*syntax.CallExpr); ok && len(ce.Args) > 0 {
				argvs = append(argvs, effectiveArgvs(newWords(ce.Args))...)
			}
			return true
		})
		for _, av := range argvs {
			n := path.Base(av[0].value)
			if downloader != "" && isInterpreter(n) {
				return rejectDownloadRun(downloader, n)
			}
			if echoed != nil && shells[n] && readsStdin(av[1:]) {
				if err := c.script(*echoed, depth+1); err != nil {
					return err
				}
			}
		}
		echoed = nil
		for _, av := range argvs {
			n := path.Base(av[0].value)
			if downloaders[n] {
				downloader = n
			}
		}
		if len(argvs) == 1 && (argvs[0][0].value == "echo" || argvs[0][0].value == "printf") {
			if text, ok := staticText(argvs[0][1:]); ok {
				echoed = &text
			}
		}
	}
	return nil
}

// assign checks a variable assignment.
func (c *checker) assign(a *syntax.Assign) *PolicyError {
	if c.allow != nil && a.Name != nil && deniedVariable(a.Name.Value) {
		return rejectVariable(a.Name.Value)
	}
	if c.scope != nil && a.Value != nil {
		if w := newWord(a.Value); w.static && looksLikePath(w.value) {
			return c.pathValue(w.value, w)
		}
	}
	return nil
}

// decl checks declare, export, local, readonly, typeset and nameref.
func (c *checker) decl(d *syntax.DeclClause) *PolicyError {
	if c.allow == nil && c.scope == nil {
		return nil
	}
	variant := ""
	if d.Variant != nil {
		variant = d.Variant.Value
	}
	if c.allow != nil && variant == "nameref" {
		return reject("`nameref` makes variables refer to other variables, which the sandbox cannot check")
	}
	for _, a := range d.Args {
		if a.Naked && a.Name == nil && a.Value != nil {
			w := newWord(a.Value)
			if c.allow != nil && w.static && strings.HasPrefix(w.value, "-") &&
				strings.Contains(w.value, "n") && variant != "export" {
				return reject("`%s -n` makes variables refer to other variables, which the sandbox cannot check", variant)
			}
			continue
		}
		if err := c.assign(a); err != nil {
			return err
		}
	}
	return nil
}

// redirect checks the file a redirection opens.
func (c *checker) redirect(r *syntax.Redirect) *PolicyError {
	if c.scope == nil || r.Word == nil {
		return nil
	}
	w := newWord(r.Word)
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
		return nil
	case syntax.DplIn, syntax.DplOut:
		if w.static && (w.value == "-" || isFD(w.value)) {
			return nil
		}
	}
	return c.strict(w)
}

// strict checks a word used as a path: it must stay inside the workspace.
func (c *checker) strict(w word) *PolicyError {
	if !w.static {
		// Only the static beginning is known: check its directory part.
		if i := strings.LastIndexByte(w.prefix, '/'); i >= 0 {
			return c.pathValue(w.prefix[:i+1], w)
		}
		return nil
	}
	if err := c.pathValue(w.value, w); err != nil {
		return err
	}
	if _, after, ok := strings.Cut(w.value, "="); ok {
		return c.pathValue(after, w)
	}
	return nil
}

// pathValue checks one value used as a path.
func (c *checker) pathValue(v string, w word) *PolicyError {
	if v == "" || v == "-" || strings.HasPrefix(v, "-") {
		return nil
	}
	if rest, ok := strings.CutPrefix(v, "~"); ok {
		user, _, _ := strings.Cut(rest, "/")
		if user == "" || user == "+" || user == "-" {
			return nil // ~ is HOME, which is the workspace
		}
		return reject("`%s` refers to another user's home directory, outside the workspace", w.source())
	}
	var p string
	if filepath.IsAbs(v) {
		p = filepath.Clean(v)
	} else {
		p = filepath.Join(c.scope.path, v)
	}
	if allowedDevice(p) {
		return nil
	}
	if !c.scope.contains(p) {
		return reject("`%s` is outside the workspace (%s); only paths inside the workspace can be used (relative paths are resolved from the workspace root)",
			w.source(), c.scope.path)
	}
	if real := resolveExisting(p); !c.scope.contains(real) {
		return reject("`%s` leads outside the workspace through a symbolic link (to %s)", w.source(), real)
	}
	return nil
}

// contains reports whether p is the workspace or inside it.
func (ws *workspace) contains(p string) bool {
	for _, root := range []string{ws.path, ws.real} {
		if p == root || strings.HasPrefix(p, root+"/") {
			return true
		}
	}
	return false
}

// resolveExisting resolves the symbolic links of the longest existing
// prefix of p.
func resolveExisting(p string) string {
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

func allowedDevice(p string) bool {
	switch p {
	case "/dev/null", "/dev/zero", "/dev/stdin", "/dev/stdout", "/dev/stderr", "/dev/random", "/dev/urandom":
		return true
	}
	return strings.HasPrefix(p, "/dev/fd/")
}

// looksLikePath reports whether an assigned value is plausibly a path
// outside the workspace: absolute with an existing first component, or
// climbing with "..".
func looksLikePath(v string) bool {
	if hasDotDot(v) {
		return true
	}
	if !strings.HasPrefix(v, "/") {
		return false
	}
	first, _, _ := strings.Cut(strings.TrimLeft(v, "/"), "/")
	if first == "" {
		return true
	}
	_, err := os.Lstat("/" + first)
	return err == nil
}

func hasDotDot(v string) bool {
	return slices.Contains(strings.Split(v, "/"), "..")
}

func isFD(s string) bool {
	s = strings.TrimSuffix(s, "-")
	_, err := strconv.Atoi(s)
	return err == nil
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r != '_' && !(r >= 'a' && r <= 'z') && !(r >= 'A' && r <= 'Z') && (i == 0 || !(r >= '0' && r <= '9')) {
			return false
		}
	}
	return true
}

// deniedVariable reports variables a command may not set while an
// allowlist is in force: they change which programs run.
func deniedVariable(name string) bool {
	switch name {
	case "PATH", "HOME", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND",
		"CDPATH", "PAGER", "MANPAGER", "EDITOR", "VISUAL":
		return true
	}
	for _, p := range []string{"LD_", "GIT_", "BASH_", "PYTHON"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func rejectVariable(name string) *PolicyError {
	return reject("setting %s is not allowed: it changes which programs run", name)
}

func rejectDownloadRun(downloader, interp string) *PolicyError {
	return reject("running downloaded content (%s … | %s) is not allowed in any sandbox mode; code from the network must not be executed", downloader, interp)
}

// staticText joins static words as echo would print them.
func staticText(args []word) (string, bool) {
	parts := make([]string, 0, len(args))
	for _, a := range args {
		if !a.static {
			return "", false
		}
		if len(parts) == 0 && a.isOption() {
			continue // echo -e, printf's format is close enough
		}
		parts = append(parts, a.value)
	}
	return strings.Join(parts, " "), true
}

// heredocText is the text of a here-document, with expansions replaced by
// a placeholder word.
func heredocText(w *syntax.Word) string {
	var b strings.Builder
	for _, part := range w.Parts {
		if lit, ok := part.(*syntax.Lit); ok {
			b.WriteString(unescape(lit.Value, true))
		} else {
			b.WriteString("_")
		}
	}
	return b.String()
}

// flattenPipe lists the stages of a pipeline.
func flattenPipe(s *syntax.Stmt) []*syntax.Stmt {
	if b, ok := s.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) && len(s.Redirs) == 0 && !s.Negated {
		return append(flattenPipe(b.X), flattenPipe(b.Y)...)
	}
	return []*syntax.Stmt{s}
}
