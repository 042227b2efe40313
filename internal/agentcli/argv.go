package agentcli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// Permission is the permission level of a run.
type Permission string

// Permission levels.
const (
	// PermissionDefault keeps the definition's batch arguments (usually
	// what the CLI needs to run tools unattended).
	PermissionDefault Permission = ""
	// PermissionReadOnly drops the batch arguments and adds read_only.
	PermissionReadOnly Permission = "read-only"
	// PermissionFullAccess adds full_access (bypass all prompts).
	PermissionFullAccess Permission = "full-access"
)

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
// enforced by the CLI itself.
func (d *Definition) Argv(inv Invocation) (args []string, warning string) {
	a := d.Args
	var head []string
	if inv.Dir != "" && len(a.WorkingDir) > 0 && a.WorkingDirFirst {
		head = expand(a.WorkingDir, map[string]string{"{dir}": inv.Dir})
	}
	args = append(args, a.BatchPrefix...)
	args = append(args, a.Base...)
	if inv.Permission != PermissionReadOnly {
		args = append(args, a.Batch...)
	}
	if len(a.JSONOutput) > 0 && !slices.Contains(args, a.JSONOutput[0]) {
		args = append(args, a.JSONOutput...)
	}
	switch inv.Permission {
	case PermissionFullAccess:
		args = append(args, a.FullAccess...)
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
	case len(a.Prompt) > 0:
		args = append(args, expand(a.Prompt, map[string]string{"{prompt}": prompt})...)
	case a.NoPromptSeparator:
		args = append(args, prompt)
	default:
		args = append(args, "--", prompt)
	}
	return append(head, args...), warning
}

// Environ returns base with the definition's environment layers and
// inv.Env applied (later entries win; the result is sorted).
func (d *Definition) Environ(base []string, inv Invocation) []string {
	m := map[string]string{}
	set := func(kv string) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	for _, kv := range base {
		set(kv)
	}
	layer := func(env map[string]string) {
		for k, v := range env {
			m[k] = v
		}
	}
	layer(d.Env)
	switch inv.Permission {
	case PermissionReadOnly:
		layer(d.ReadOnlyEnv)
	case PermissionFullAccess:
		layer(d.FullAccessEnv)
	}
	for _, kv := range inv.Env {
		set(kv)
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// Detection is the result of looking for a CLI.
type Detection struct {
	ID      string
	Path    string // resolved absolute path; "" when not found
	Version string // "" when the probe failed
	Err     error
}

// Detect resolves def's binary on path (a PATH-style list; "" means the
// process PATH) and runs the version probe with a timeout.
func Detect(ctx context.Context, def *Definition, path string) Detection {
	det := Detection{ID: def.ID}
	bin, err := lookPath(def.Binary, path)
	if err != nil {
		det.Err = err
		return det
	}
	det.Path = bin
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	vargs := def.VersionArgs
	if len(vargs) == 0 {
		vargs = []string{"--version"}
	}
	cmd := exec.CommandContext(ctx, bin, vargs...)
	cmd.WaitDelay = 2 * time.Second
	out, err := cmd.Output()
	if err != nil {
		det.Err = fmt.Errorf("probe %s version: %w", def.Binary, err)
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

// Resolve finds the definition's binary on the PATH-style list path ("" =
// the process PATH).
func (d *Definition) Resolve(path string) (string, error) { return lookPath(d.Binary, path) }

// lookPath finds bin on the PATH-style list path ("" = $PATH).
func lookPath(bin, path string) (string, error) {
	if strings.ContainsRune(bin, os.PathSeparator) {
		if st, err := os.Stat(bin); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return filepath.Abs(bin)
		}
		return "", fmt.Errorf("look for %s: not an executable file", bin)
	}
	if path == "" {
		p, err := exec.LookPath(bin)
		if err != nil {
			return "", fmt.Errorf("look for %s on PATH: %w", bin, err)
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
	return "", fmt.Errorf("look for %s on PATH: %w", bin, exec.ErrNotFound)
}
