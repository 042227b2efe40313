package sandbox

import (
	"slices"
	"strings"
)

// DefaultAllowedCommands returns the default command allowlist, enforced
// in the fallback when no explicit list is configured. An entry with a
// space ("git log") allows only that subcommand.
//
// `go`, `npm` and other toolchains are deliberately absent: they run
// arbitrary code and fetch dependencies from the network, which the
// fallback cannot contain. A workflow movement that needs them lists them
// in allowed_commands.
func DefaultAllowedCommands() []string {
	return []string{
		// files
		"cp", "mv", "rm", "mkdir", "rmdir", "touch", "ls", "find", "stat", "realpath", "readlink",
		// text
		"cat", "head", "tail", "grep", "sed", "awk", "sort", "uniq", "wc", "cut", "tr",
		"diff", "cmp", "comm", "paste", "nl", "tee",
		// shell utilities
		"echo", "printf", "pwd", "test", "[", "true", "false", "sleep", "seq", "date",
		"basename", "dirname", "env", "xargs", "md5sum", "sha256sum",
		// data and charts
		"python3",
		// read-only git
		"git log", "git diff", "git status", "git show",
		// archives
		"tar", "zip", "unzip", "gzip", "gunzip",
	}
}

// safeBuiltins are shell builtins always allowed when an allowlist is in
// force: they neither run other programs by themselves nor escape the
// checks (command, exec and builtin are unwrapped and their command is
// checked in turn).
var safeBuiltins = map[string]bool{
	"cd": true, "pwd": true, "echo": true, "printf": true, "test": true, "[": true,
	"true": true, "false": true, ":": true, "exit": true, "return": true, "break": true,
	"continue": true, "shift": true, "set": true, "unset": true, "export": true,
	"local": true, "declare": true, "typeset": true, "readonly": true, "read": true,
	"wait": true, "getopts": true, "let": true, "umask": true, "type": true,
	"shopt": true, "mapfile": true, "readarray": true, "command": true, "exec": true,
	"builtin": true, "times": true,
}

// forbiddenBuiltins cannot be checked statically; the value is the reason.
var forbiddenBuiltins = map[string]string{
	"eval":   "`eval` runs text as a command, which the sandbox cannot check; write the command out directly",
	"source": "`source` runs a file's contents as commands, which the sandbox cannot check",
	".":      "`.` (source) runs a file's contents as commands, which the sandbox cannot check",
	"trap":   "`trap` runs text as a command later, which the sandbox cannot check",
	"enable": "`enable` loads or changes shell builtins, which is not allowed",
	"alias":  "`alias` changes what command names mean, which is not allowed",
	"hash":   "`hash` changes where command names are found, which is not allowed",
	"fc":     "`fc` re-runs commands from history, which the sandbox cannot check",
}

// allowlist is a parsed command allowlist.
type allowlist struct {
	entries []string            // as configured, for messages
	any     map[string]bool     // name allowed with any arguments
	subs    map[string][]string // name → the only allowed subcommands
}

func newAllowlist(entries []string) *allowlist {
	a := &allowlist{any: map[string]bool{}, subs: map[string][]string{}}
	for _, e := range entries {
		fields := strings.Fields(e)
		switch len(fields) {
		case 0:
			continue
		case 1:
			a.any[fields[0]] = true
		default:
			a.subs[fields[0]] = append(a.subs[fields[0]], fields[1])
		}
		a.entries = append(a.entries, strings.Join(fields, " "))
	}
	return a
}

// has reports whether name may run at all.
func (a *allowlist) has(name string) bool {
	return a.any[name] || len(a.subs[name]) > 0
}

// subcommands returns the allowed subcommands of name, or nil when any
// arguments are allowed.
func (a *allowlist) subcommands(name string) []string {
	if a.any[name] {
		return nil
	}
	return a.subs[name]
}

// describe lists the allowlist for a rejection message.
func (a *allowlist) describe() string {
	if len(a.entries) == 0 {
		return "none (only shell builtins such as cd, echo, printf, read and export)"
	}
	list := slices.Clone(a.entries)
	return strings.Join(list, ", ") + " (plus shell builtins such as cd, read and export)"
}
