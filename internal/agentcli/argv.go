package agentcli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Permission is the permission level of a run (docs/agent-clis.md,
// "Permission modes"): what the CLI may do without asking anyone.
type Permission string

// Permission levels.
const (
	// PermissionDefault is the level nobody chose: PermissionEdit.
	PermissionDefault Permission = ""
	// PermissionReadOnly may read and search, never change a file or run
	// a command that could: the definition's batch arguments are dropped
	// and read_only (and read_only_env) added.
	PermissionReadOnly Permission = "read-only"
	// PermissionEdit may change files in the working directory and run
	// commands there: edit and edit_env.
	PermissionEdit Permission = "edit"
	// PermissionFull bypasses every prompt and the CLI's own sandbox:
	// full_access and full_access_env.
	PermissionFull Permission = "full"
	// permissionRelay is edit with every permission prompt relayed to the
	// caller (relay.go): the batch arguments without edit's pre-approvals.
	permissionRelay Permission = "relay"
)

// Permissions lists the levels a user can choose, in order.
var Permissions = []Permission{PermissionReadOnly, PermissionEdit, PermissionFull}

// ParsePermission checks a level given by a user ("" is the default).
func ParsePermission(s string) (Permission, error) {
	switch p := Permission(strings.TrimSpace(s)); p {
	case PermissionDefault, PermissionReadOnly, PermissionEdit, PermissionFull:
		return p, nil
	}
	return "", fmt.Errorf("permission %q: expected read-only, edit or full", s)
}

// Level is p with the default resolved (PermissionEdit).
func (p Permission) Level() Permission {
	if p == PermissionDefault {
		return PermissionEdit
	}
	return p
}

// Invocation is one prompt to run on a CLI.
type Invocation struct {
	Prompt string
	// SessionID resumes that CLI session when set.
	SessionID string
	Model     string
	// Dir is the working directory (the process cwd; passed as a flag too
	// when the definition has working_dir).
	Dir string
	// ExtraDirs are additional directories the agent may use.
	ExtraDirs []string
	// Images are image files to attach.
	Images []string
	// SystemPrompt is appended to the CLI's own system prompt when it
	// supports that, else embedded before the prompt of a new session.
	SystemPrompt string
	Permission   Permission
	NoTools      bool
	// ExtraArgs are user arguments placed before the prompt.
	ExtraArgs []string
	// Env holds extra environment entries ("K=V") for this run.
	Env []string
}

func expand(tokens []string, vars map[string]string) []string {
	out := make([]string, 0, len(tokens))
	for _, t := range tokens {
		for k, v := range vars {
			t = strings.ReplaceAll(t, k, v)
		}
		out = append(out, t)
	}
	return out
}

// dedupFlags removes repeated flag tokens (and, for a repeated "--flag
// value" pair, the value too); positionals are untouched.
func dedupFlags(args []string) []string {
	seen := map[string]bool{}
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "--" || a == "-" {
			out = append(out, a)
			continue
		}
		hasValue := i+1 < len(args) && !strings.HasPrefix(args[i+1], "-")
		key := a
		if hasValue {
			key = a + "\x00" + args[i+1]
		}
		if seen[key] || seen[a] && !hasValue {
			if hasValue {
				i++
			}
			continue
		}
		seen[key], seen[a] = true, true
		out = append(out, a)
		if hasValue {
			out = append(out, args[i+1])
			i++
		}
	}
	return out
}

// Argv assembles the arguments (without the binary) for inv, following the
// order documented on Args. It returns a warning when read-only mode is not
// enforced by the CLI itself. With args.prompt_stdin the prompt is not
// among them (see argvStdin).
func (d *Definition) Argv(inv Invocation) (args []string, warning string) {
	args, _, warning = d.argvStdin(inv)
	return args, warning
}

// argvStdin is Argv, also returning what goes on stdin: the prompt when
// the definition has args.prompt_stdin, else "".
func (d *Definition) argvStdin(inv Invocation) (args []string, stdin, warning string) {
	a := d.Args
	var head []string
	if inv.Dir != "" && len(a.WorkingDir) > 0 && a.WorkingDirFirst {
		head = expand(a.WorkingDir, map[string]string{"{dir}": inv.Dir})
	}
	args = append(args, a.BatchPrefix...)
	args = append(args, a.Base...)
	level := inv.Permission.Level()
	if level != PermissionReadOnly {
		args = append(args, a.Batch...)
	}
	if len(a.JSONOutput) > 0 && !slices.Contains(args, a.JSONOutput[0]) {
		args = append(args, a.JSONOutput...)
	}
	switch level {
	case PermissionFull:
		args = append(args, a.FullAccess...)
	case PermissionEdit:
		args = append(args, a.Edit...)
	case PermissionReadOnly:
		args = append(args, a.ReadOnly...)
		if !a.ReadOnlyEnforce {
			warning = fmt.Sprintf("%s does not enforce read-only mode itself; it is only requested", d.Name)
		}
	}
	if inv.NoTools {
		args = append(args, a.NoTools...)
	}
	if inv.Model != "" {
		args = append(args, expand(a.Model, map[string]string{"{model}": inv.Model})...)
	}
	args = dedupFlags(args)
	if inv.SessionID != "" {
		args = append(args, expand(a.Resume, map[string]string{"{session}": inv.SessionID})...)
	}
	if inv.Dir != "" && len(a.WorkingDir) > 0 && !a.WorkingDirFirst {
		args = append(args, expand(a.WorkingDir, map[string]string{"{dir}": inv.Dir})...)
	}
	for _, dir := range inv.ExtraDirs {
		args = append(args, expand(a.AdditionalDir, map[string]string{"{dir}": dir})...)
	}
	prompt := inv.Prompt
	if inv.SystemPrompt != "" {
		if len(a.SystemPrompt) > 0 {
			args = append(args, expand(a.SystemPrompt, map[string]string{"{text}": inv.SystemPrompt})...)
		} else if inv.SessionID == "" {
			prompt = inv.SystemPrompt + "\n\n---\n\n# User Request\n\n" + prompt
		}
	}
	for _, img := range inv.Images {
		if a.ImagePrompt != "" {
			prompt = strings.ReplaceAll(a.ImagePrompt, "{path}", img) + prompt
		} else {
			args = append(args, expand(a.Image, map[string]string{"{path}": img})...)
		}
	}
	args = append(args, inv.ExtraArgs...)
	switch {
	case a.PromptStdin:
		stdin = prompt
	case len(a.Prompt) > 0:
		args = append(args, expand(a.Prompt, map[string]string{"{prompt}": prompt})...)
	case a.NoPromptSeparator:
		args = append(args, prompt)
	default:
		args = append(args, "--", prompt)
	}
	return append(head, args...), stdin, warning
}

// Environ returns base with the definition's environment, inv.Env and
// then the permission level's environment applied (later layers win, so
// that no run setting undoes the level; the result is sorted). Variables
// the definition lists in json_env hold JSON objects: each layer is merged
// into them key by key instead of replacing them (see mergeJSON).
func (d *Definition) Environ(base []string, inv Invocation) []string {
	m := map[string]string{}
	put := func(k, v string) {
		if old, ok := m[k]; ok && slices.Contains(d.JSONEnv, k) {
			v = mergeJSON(old, v)
		}
		m[k] = v
	}
	set := func(kv string) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			put(k, v)
		}
	}
	for _, kv := range base {
		set(kv)
	}
	layer := func(env map[string]string) {
		keys := slices.Sorted(maps.Keys(env))
		for _, k := range keys {
			put(k, env[k])
		}
	}
	layer(d.Env)
	for _, kv := range inv.Env {
		set(kv)
	}
	switch inv.Permission.Level() {
	case PermissionReadOnly:
		layer(d.ReadOnlyEnv)
	case PermissionEdit, permissionRelay:
		layer(d.EditEnv)
	case PermissionFull:
		layer(d.FullAccessEnv)
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// mergeJSON merges the JSON object over into the JSON object base: a key
// of both whose values are objects is merged the same way, any other key
// of over replaces base's. Keys keep base's order, new ones follow in
// over's order (OpenCode's permission rules are ordered: the last match
// wins). When either is not a JSON object, over is returned.
func mergeJSON(base, over string) string {
	b, okB := decodeObject([]byte(base))
	o, okO := decodeObject([]byte(over))
	if !okB || !okO {
		return over
	}
	out, err := json.Marshal(mergeObjects(b, o))
	if err != nil {
		return over
	}
	return string(out)
}

// object is a JSON object that keeps its keys' order.
type object []member

type member struct {
	key string
	val json.RawMessage
}

func (o object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(m.val)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// decodeObject decodes data when it is a JSON object.
func decodeObject(data []byte) (object, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var o object
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := t.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, false
		}
		o = append(o, member{key, val})
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	return o, true
}

func mergeObjects(base, over object) object {
	out := slices.Clone(base)
	for _, m := range over {
		i := slices.IndexFunc(out, func(b member) bool { return b.key == m.key })
		if i < 0 {
			out = append(out, m)
			continue
		}
		bo, okB := decodeObject(out[i].val)
		oo, okO := decodeObject(m.val)
		if okB && okO {
			if merged, err := json.Marshal(mergeObjects(bo, oo)); err == nil {
				out[i].val = merged
				continue
			}
		}
		out[i].val = m.val
	}
	return out
}

// Detection is the result of looking for a CLI.
type Detection struct {
	ID      string
	Path    string // resolved absolute path; "" when not found
	Version string // "" when the probe failed
	Err     error
}

// ProbeTimeout bounds a version probe: a CLI that has not answered by then
// is reported as not answering (its version unknown), with a further second
// for its output to close. A Node-based CLI answers in about 2 s of CPU.
var ProbeTimeout = 5 * time.Second

// Detect resolves def's binary on path (a PATH-style list; "" means the
// process PATH) and runs the version probe, bounded by ProbeTimeout.
func Detect(ctx context.Context, def *Definition, path string) Detection {
	det := Detection{ID: def.ID}
	bin, err := lookPath(def.Binary, path)
	if err != nil {
		det.Err = err
		return det
	}
	det.Path = bin
	vargs := def.VersionArgs
	if len(vargs) == 0 {
		vargs = []string{"--version"}
	}
	pctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(pctx, bin, vargs...)
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		probe := strings.Join(append([]string{bin}, vargs...), " ")
		if ctx.Err() == nil && pctx.Err() != nil {
			det.Err = fmt.Errorf("%s did not answer within %s", probe, ProbeTimeout)
		} else {
			det.Err = fmt.Errorf("%s: %w", probe, err)
		}
		return det
	}
	det.Version = strings.TrimSpace(firstLine(string(out)))
	if def.VersionPattern != "" {
		re, err := regexp.Compile(def.VersionPattern)
		if err == nil {
			if m := re.FindStringSubmatch(string(out)); m != nil {
				det.Version = m[len(m)-1]
			}
		}
	}
	return det
}

// DetectAll is Detect of every definition, probed at the same time: a list
// waits for its slowest CLI, not for the sum of them.
func DetectAll(ctx context.Context, defs []*Definition, path string) []Detection {
	out := make([]Detection, len(defs))
	var wg sync.WaitGroup
	for i, def := range defs {
		wg.Go(func() { out[i] = Detect(ctx, def, path) })
	}
	wg.Wait()
	return out
}

// Resolve finds the definition's binary on the PATH-style list path ("" =
// the process PATH).
func (d *Definition) Resolve(path string) (string, error) { return lookPath(d.Binary, path) }

// lookPath finds bin on the PATH-style list path ("" = $PATH).
func lookPath(bin, path string) (string, error) {
	if strings.ContainsRune(bin, os.PathSeparator) {
		// Each fault by its name: "not an executable file" was said of a
		// path that does not exist as well.
		st, err := os.Stat(bin)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", fmt.Errorf("look for %s: no such file", bin)
		case err != nil:
			return "", fmt.Errorf("look for %s: %w", bin, err)
		case st.IsDir():
			return "", fmt.Errorf("look for %w", &UnusableError{Path: bin, Why: "a directory, not an executable file"})
		case st.Mode()&0o111 == 0:
			return "", fmt.Errorf("look for %w", &UnusableError{Path: bin, Why: "not executable (chmod +x " + bin + ")"})
		}
		return filepath.Abs(bin)
	}
	if path == "" {
		p, err := exec.LookPath(bin)
		if err != nil {
			return "", fmt.Errorf("look for %s on PATH: %w", bin, notExecutable(bin, os.Getenv("PATH"), err))
		}
		return filepath.Abs(p)
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, bin)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return filepath.Abs(p)
		}
	}
	return "", fmt.Errorf("look for %s on PATH: %w", bin, notExecutable(bin, path, exec.ErrNotFound))
}

// UnusableError is a binary that is there but cannot be run: a
// directory, or a file without execute permission. "not found" was said of
// it, and the user looked for a missing install.
type UnusableError struct {
	Path, Why string
}

func (e *UnusableError) Error() string { return e.Path + ": " + e.Why }

// notExecutable is the error of bin not found on path: an UnusableError
// when the first file of that name on path is not executable (exec.LookPath
// passes over it), else err.
func notExecutable(bin, path string, err error) error {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, bin)
		if st, serr := os.Stat(p); serr == nil && st.Mode().IsRegular() {
			if abs, aerr := filepath.Abs(p); aerr == nil {
				p = abs
			}
			return &UnusableError{Path: p, Why: "not executable (chmod +x " + p + ")"}
		}
	}
	return err
}
