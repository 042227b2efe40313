package sandbox

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// shells run shell code given with -c, from a file or from stdin.
var shells = set("sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "busybox")

// downloaders fetch content from the network.
var downloaders = set("curl", "wget", "fetch", "aria2c")

var pythonName = regexp.MustCompile(`^python[0-9.]*$`)

// isInterpreter reports programs that execute code they are given.
func isInterpreter(name string) bool {
	return shells[name] || pythonName.MatchString(name) ||
		slices.Contains([]string{"perl", "ruby", "node", "nodejs", "php", "lua"}, name)
}

var (
	privileged = set("sudo", "su", "doas", "pkexec", "runuser")
	systemCmds = set("systemctl", "service", "crontab", "at", "batch", "shutdown", "reboot",
		"halt", "poweroff", "init", "telinit")
	// systemPackageManagers are rejected whatever their arguments.
	systemPackageManagers = set("apt", "apt-get", "aptitude", "dnf", "yum", "microdnf", "apk",
		"zypper", "pacman", "brew", "snap", "flatpak", "port", "nix-env", "emerge", "pkg")
	pipName = regexp.MustCompile(`^pip[0-9.]*$`)
	// installVerbs maps language package managers to their installing
	// subcommands.
	installVerbs = map[string][]string{
		"npm": {"install", "i", "in", "ins", "inst", "insta", "instal", "isnt", "isnta", "isntal",
			"isntall", "add", "ci", "install-test", "it", "install-ci-test", "cit"},
		"pnpm":       {"add", "install", "i", "install-test", "it"},
		"bun":        {"add", "a", "install", "i"},
		"yarn":       {"add", "install"},
		"cargo":      {"install", "binstall"},
		"go":         {"install"},
		"gem":        {"install"},
		"conda":      {"install", "create"},
		"mamba":      {"install", "create"},
		"micromamba": {"install", "create"},
		"poetry":     {"add", "install"},
		"pipenv":     {"install"},
	}
	// pmValued are package-manager options that take a separate value.
	pmValued = set("--prefix", "-C", "--cwd", "--dir", "--filter", "-F", "-w", "--workspace",
		"--registry", "--cache", "--userconfig", "--proxy", "--python", "--log", "--cache-dir",
		"--cert", "--timeout", "-p", "--prefix-dir", "-n", "--name")
)

// alwaysRule returns why a command is rejected in every sandbox mode, or
// "".
func alwaysRule(base string, args []word) string {
	const installHint = "packages cannot be installed at run time in any sandbox mode (the environment is not persistent). If a package seems necessary, tell the user which one and why"
	switch {
	case privileged[base]:
		return fmt.Sprintf("`%s` (privilege escalation) is not allowed", base)
	case systemCmds[base]:
		return fmt.Sprintf("`%s` makes persistent system changes, which is not allowed", base)
	case systemPackageManagers[base]:
		return fmt.Sprintf("`%s` is a system package manager: %s", base, installHint)
	case base == "dpkg":
		for _, a := range args {
			if a.static && slices.Contains([]string{"-i", "--install", "--unpack", "-r", "--remove",
				"-P", "--purge", "--configure"}, a.value) {
				return fmt.Sprintf("`dpkg %s` changes installed packages: %s", a.value, installHint)
			}
		}
	case pipName.MatchString(base):
		if sub, _ := operand(args, pmValued); sub == "install" || sub == "download" {
			return fmt.Sprintf("`%s %s`: %s", base, sub, installHint)
		}
	case pythonName.MatchString(base):
		mod, code, rest, ok := pythonModule(args)
		// pip.__main__, pip._internal.cli.main, … run pip too.
		root, _, _ := strings.Cut(mod, ".")
		if ok && (pipName.MatchString(root) || root == "ensurepip") {
			sub, _ := operand(rest, pmValued)
			if root == "ensurepip" || sub == "install" || sub == "download" {
				return fmt.Sprintf("`%s -m %s %s`: %s", base, mod, sub, installHint)
			}
		}
		if code != "" && pipCode.MatchString(code) {
			return fmt.Sprintf("`%s -c` running pip: %s", base, installHint)
		}
	case base == "pipx" || base == "uvx" || base == "bunx":
		return fmt.Sprintf("`%s` downloads and runs packages: %s", base, installHint)
	case base == "uv":
		sub, i := operand(args, pmValued)
		next, _ := operand(args[min(i+1, len(args)):], pmValued)
		if sub == "add" || (sub == "pip" || sub == "tool") && next == "install" {
			return fmt.Sprintf("`uv %s`: %s", strings.TrimSpace(sub+" "+next), installHint)
		}
	case base == "yarn":
		sub, i := operand(args, pmValued)
		informational := slices.ContainsFunc(args, func(a word) bool {
			return a.static && slices.Contains([]string{"-v", "--version", "-h", "--help"}, a.value)
		})
		if sub == "" && i < 0 && !informational {
			return "`yarn` without a subcommand installs packages: " + installHint
		}
		if sub == "global" || sub == "dlx" {
			return fmt.Sprintf("`yarn %s`: %s", sub, installHint)
		}
		if slices.Contains(installVerbs[base], sub) {
			return fmt.Sprintf("`yarn %s`: %s", sub, installHint)
		}
	case installVerbs[base] != nil:
		sub, _ := operand(args, pmValued)
		if slices.Contains(installVerbs[base], sub) || (base == "pnpm" && sub == "dlx") {
			return fmt.Sprintf("`%s %s`: %s", base, sub, installHint)
		}
	case base == "chmod":
		if mode, ok := chmodMode(args); ok && modeLoosens(mode) {
			return fmt.Sprintf("`chmod %s` loosens permissions (adds execute or setuid/setgid, or write for others), which is not allowed; run scripts through their interpreter (for example `bash script.sh` or `python3 script.py`)", mode)
		}
	}
	return ""
}

// operand returns the first static argument that is not an option (nor
// the value of an option in valued) and its index; index -1 when there is
// none.
func operand(args []word, valued map[string]bool) (string, int) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.static {
			return "", i
		}
		if a.value == "--" {
			if i+1 < len(args) && args[i+1].static {
				return args[i+1].value, i + 1
			}
			return "", -1
		}
		if a.isOption() {
			if valued[a.value] {
				i++
			}
			continue
		}
		return a.value, i
	}
	return "", -1
}

// pipCode matches Python code that runs pip (runpy.run_module("pip"),
// import pip, pip._internal, …): cheap, and a policy, not a boundary.
var pipCode = regexp.MustCompile(`(?:runpy|import|__import__|importlib|from)\b[^\n]*\bpip[0-9.]*\b|\bpip[0-9.]*\._internal\b|\bpip[0-9.]*\.main\b`)

// pythonFlags are python's options without a value; they may be grouped
// (-Im, -IBm).
const pythonFlags = "bBdEhiIOPqsSuvVx"

// pythonModule finds `-m module` (or `-c code`) among python's leading
// options, including grouped short options (-Im pip, -Impip). code is the
// -c argument when static.
func pythonModule(args []word) (mod, code string, rest []word, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.static || !a.isOption() || strings.HasPrefix(a.value, "--") {
			return "", "", nil, false
		}
		v := a.value[1:]
	cluster:
		for j := 0; j < len(v); j++ {
			switch ch := v[j]; {
			case strings.IndexByte(pythonFlags, ch) >= 0:
			case ch == 'm' || ch == 'c':
				val, next := v[j+1:], i+1
				if val == "" {
					if i+1 >= len(args) || !args[i+1].static {
						return "", "", nil, false
					}
					val, next = args[i+1].value, i+2
				}
				if ch == 'c' {
					return "", val, nil, false
				}
				return val, "", args[next:], true
			case ch == 'W' || ch == 'X':
				if j == len(v)-1 {
					i++ // the value is the next argument
				}
				break cluster
			default:
				return "", "", nil, false
			}
		}
	}
	return "", "", nil, false
}

// chmodMode returns chmod's mode operand.
func chmodMode(args []word) (string, bool) {
	for _, a := range args {
		if !a.static {
			return "", false
		}
		v := a.value
		switch {
		case strings.HasPrefix(v, "--reference"):
			return "", false
		case strings.HasPrefix(v, "--"):
			continue
		case strings.HasPrefix(v, "-") && len(v) > 1 && strings.Trim(v[1:], "Rcfv") == "":
			continue
		}
		return v, true
	}
	return "", false
}

var octalMode = regexp.MustCompile(`^[0-7]{1,4}$`)
var symbolicMode = regexp.MustCompile(`^[ugoa]*([-+=][rwxXstugo]*)+(,[ugoa]*([-+=][rwxXstugo]*)+)*$`)

// modeLoosens reports modes that add execute, setuid/setgid or
// write-for-others (a numeric mode with any of those bits counts).
func modeLoosens(m string) bool {
	if octalMode.MatchString(m) {
		n, _ := strconv.ParseUint(m, 8, 32)
		return n&0o6113 != 0
	}
	if !symbolicMode.MatchString(m) {
		return false
	}
	for _, clause := range strings.Split(m, ",") {
		i := strings.IndexAny(clause, "+-=")
		who := clause[:i]
		var op byte
		for j := i; j < len(clause); j++ {
			switch ch := clause[j]; ch {
			case '+', '-', '=':
				op = ch
			default:
				if op == '-' {
					continue
				}
				if ch == 'x' || ch == 's' {
					return true
				}
				if (ch == 'w' || ch == 'u' || ch == 'g') && strings.ContainsAny(who, "oa") {
					return true
				}
			}
		}
	}
	return false
}

// shellCode finds the code of `sh -c CODE`.
func shellCode(args []word) (word, bool) {
	hasC := false
	i := 0
loop:
	for ; i < len(args); i++ {
		a := args[i]
		if !a.static {
			break
		}
		v := a.value
		switch {
		case v == "--":
			i++
			break loop
		case v == "-o" || v == "+o" || v == "-O" || v == "+O":
			i++
		case strings.HasPrefix(v, "--"):
		case len(v) > 1 && (v[0] == '-' || v[0] == '+'):
			if v[0] == '-' && strings.Contains(v[1:], "c") {
				hasC = true
			}
		default:
			break loop
		}
	}
	if !hasC || i >= len(args) {
		return word{}, false
	}
	return args[i], true
}

// readsStdin reports whether a shell with these arguments reads its
// commands from standard input (no -c and no script operand, or -s).
func readsStdin(args []word) bool {
	if _, ok := shellCode(args); ok {
		return false
	}
	for _, a := range args {
		if !a.static {
			return false
		}
		if a.value == "-s" {
			return true
		}
		if !a.isOption() && !strings.HasPrefix(a.value, "+") {
			return false
		}
	}
	return true
}

// wrapperSpec describes a command that runs another command given as its
// trailing arguments.
type wrapperSpec struct {
	valued     map[string]bool // options taking a separate value
	positional int             // operands before the command (timeout's duration)
}

var wrappers = map[string]wrapperSpec{
	"command":  {},
	"builtin":  {},
	"exec":     {valued: set("-a")},
	"nohup":    {},
	"setsid":   {},
	"unbuffer": {},
	"time":     {valued: set("-f", "--format", "-o", "--output")},
	"nice":     {valued: set("-n", "--adjustment")},
	"ionice":   {valued: set("-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "--pgid", "-u", "--uid")},
	"stdbuf":   {valued: set("-i", "-o", "-e", "--input", "--output", "--error")},
	"timeout":  {valued: set("-s", "--signal", "-k", "--kill-after"), positional: 1},
	"xargs": {valued: set("-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "-n",
		"--max-args", "-P", "--max-procs", "-s", "--max-chars", "--process-slot-var")},
}

// splitWrapper separates the commands a command runs (nested argvs) from
// its own arguments.
func splitWrapper(base string, args []word) (nested [][]word, own []word) {
	switch base {
	case "env":
		return splitEnv(args)
	case "find":
		return splitFind(args)
	case "command":
		for _, a := range args {
			if !a.isOption() {
				break
			}
			if strings.ContainsAny(a.value, "vV") {
				return nil, args // command -v only looks the name up
			}
		}
	}
	spec, ok := wrappers[base]
	if !ok {
		return nil, args
	}
	i := 0
	for i < len(args) {
		a := args[i]
		if !a.static {
			// -I{} has a brace, so is not static, but is an option.
			if strings.HasPrefix(a.prefix, "-") {
				i++
				continue
			}
			break
		}
		if a.value == "--" {
			i++
			break
		}
		if !a.isOption() {
			break
		}
		if spec.valued[a.value] {
			i++
		}
		i++
	}
	i = min(i+spec.positional, len(args))
	if i < len(args) {
		nested = [][]word{args[i:]}
	}
	return nested, args[:i]
}

func splitEnv(args []word) (nested [][]word, own []word) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.static {
			return [][]word{args[i:]}, args[:i]
		}
		v := a.value
		switch {
		case v == "--":
			return [][]word{args[i+1:]}, args[:i+1]
		case v == "-S" || v == "--split-string" || strings.HasPrefix(v, "--split-string=") ||
			strings.HasPrefix(v, "-S") && len(v) > 2:
			var s word
			var restAt int
			switch {
			case v == "-S" || v == "--split-string":
				if i+1 >= len(args) {
					return nil, args
				}
				s, restAt = args[i+1], i+2
			case strings.HasPrefix(v, "--split-string="):
				s, restAt = literal(strings.TrimPrefix(v, "--split-string=")), i+1
			default:
				s, restAt = literal(v[2:]), i+1
			}
			if !s.static {
				return [][]word{append([]word{s}, args[restAt:]...)}, args[:i]
			}
			var inner []word
			for _, f := range strings.Fields(s.value) {
				inner = append(inner, literal(f))
			}
			return [][]word{append(inner, args[restAt:]...)}, args[:i]
		case v == "-u" || v == "--unset" || v == "-C" || v == "--chdir":
			i++
		case a.isOption() || v == "-":
		case strings.Contains(v, "=") && isName(v[:strings.IndexByte(v, '=')]):
		default:
			return [][]word{args[i:]}, args[:i]
		}
	}
	return nil, args
}

func splitFind(args []word) (nested [][]word, own []word) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a.static && slices.Contains([]string{"-exec", "-execdir", "-ok", "-okdir"}, a.value) {
			j := i + 1
			for j < len(args) && !(args[j].static && (args[j].value == ";" || args[j].value == "+")) {
				j++
			}
			nested = append(nested, args[i+1:j])
			own = append(own, a)
			i = j
			continue
		}
		own = append(own, a)
	}
	return nested, own
}

// effectiveArgvs lists a command and every command it runs through
// wrappers (env, xargs, timeout, find -exec, …), outermost first.
func effectiveArgvs(ws []word) [][]word {
	if len(ws) == 0 || !ws[0].static {
		return nil
	}
	out := [][]word{ws}
	nested, _ := splitWrapper(path.Base(ws[0].value), ws[1:])
	for _, n := range nested {
		out = append(out, effectiveArgvs(n)...)
	}
	return out
}

// subcommand finds the subcommand of a command restricted to some
// subcommands (git's global options are skipped).
func subcommand(name string, args []word) (string, bool) {
	valued := map[string]bool{}
	if name == "git" {
		valued = set("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env")
	}
	sub, i := operand(args, valued)
	return sub, i >= 0 && sub != ""
}

// dangerousOption returns why an option that makes an allowed command run
// another program is rejected (allowlist mode), or "".
func dangerousOption(name string, args []word) string {
	const runs = "runs another program, which the sandbox cannot check"
	for i, a := range args {
		if !a.static {
			continue
		}
		v := a.value
		switch name {
		case "git":
			if v == "-c" || hasOptPrefix(v, "--config-env") || hasOptPrefix(v, "--exec-path") ||
				v == "--ext-diff" || hasOptPrefix(v, "--upload-pack") {
				return fmt.Sprintf("`git %s` can run other programs through configuration, which is not allowed", v)
			}
		case "tar":
			for _, o := range []string{"--to-command", "--checkpoint-action", "--use-compress-program",
				"--rsh-command", "--info-script", "--new-volume-script", "--rmt-command"} {
				if hasOptPrefix(v, o) {
					return fmt.Sprintf("`tar %s` %s", o, runs)
				}
			}
			short := strings.HasPrefix(v, "-") && !strings.HasPrefix(v, "--")
			oldStyle := i == 0 && !strings.HasPrefix(v, "-")
			if (short || oldStyle) && strings.ContainsAny(v, "IF") {
				return fmt.Sprintf("`tar %s` (-I/-F) %s", v, runs)
			}
		case "zip":
			if v == "-TT" || hasOptPrefix(v, "--unzip-command") {
				return fmt.Sprintf("`zip %s` %s", v, runs)
			}
		case "sort":
			if hasOptPrefix(v, "--compress-program") {
				return "`sort --compress-program` " + runs
			}
		}
	}
	return ""
}

func hasOptPrefix(v, opt string) bool {
	return v == opt || strings.HasPrefix(v, opt+"=")
}

// argKind says how an option's value is checked.
type argKind int

const (
	kindText argKind = iota // not a path
	kindPath                // a path
)

// operandSpec describes the arguments of a command for the path scope.
type operandSpec struct {
	opts map[string]argKind // options with a separate value
	// program options supply the program or pattern; when none is given,
	// the first operand is the program (text).
	program map[string]bool
}

var textCommands = set("echo", "printf", "tr", "test", "[", "true", "false", "seq", "sleep",
	"expr", "basename", "dirname", ":", "read", "let", "export", "declare", "local", "typeset",
	"readonly", "set", "unset", "shift", "exit", "return", "break", "continue", "wait",
	"getopts", "umask", "type", "shopt", "times", "mapfile", "readarray", "pwd")

var operandSpecs = map[string]operandSpec{
	"grep": {
		opts: map[string]argKind{"-e": kindText, "--regexp": kindText, "-f": kindPath, "--file": kindPath,
			"-m": kindText, "--max-count": kindText, "-A": kindText, "-B": kindText, "-C": kindText,
			"--label": kindText},
		program: set("-e", "--regexp", "-f", "--file"),
	},
	"sed": {
		opts:    map[string]argKind{"-e": kindText, "--expression": kindText, "-f": kindPath, "--file": kindPath, "-l": kindText, "--line-length": kindText},
		program: set("-e", "--expression", "-f", "--file"),
	},
	"awk": {
		opts:    map[string]argKind{"-f": kindPath, "--file": kindPath, "-v": kindText, "--assign": kindText, "-F": kindText, "--field-separator": kindText},
		program: set("-f", "--file"),
	},
	"python3": {
		opts: map[string]argKind{"-c": kindText, "-m": kindText, "-W": kindText, "-X": kindText},
	},
	"find": {
		opts: map[string]argKind{"-name": kindText, "-iname": kindText, "-path": kindText, "-ipath": kindText,
			"-wholename": kindText, "-iwholename": kindText, "-regex": kindText, "-iregex": kindText,
			"-lname": kindText, "-ilname": kindText, "-printf": kindText},
	},
}

// pathOperands returns the arguments of a command that are checked as
// paths (fallback path scope).
func pathOperands(base string, args []word) []word {
	if textCommands[base] {
		return nil
	}
	switch base {
	case "egrep", "fgrep", "rgrep":
		base = "grep"
	case "gawk", "mawk", "nawk":
		base = "awk"
	case "python":
		base = "python3"
	}
	if pythonName.MatchString(base) {
		base = "python3"
	}
	spec, ok := operandSpecs[base]
	if !ok {
		return args
	}
	programGiven := false
	for _, a := range args {
		if a.static && optionGiven(a.value, spec.program) {
			programGiven = true
		}
	}
	var out []word
	firstOperand := true
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.static {
			out = append(out, a)
			continue
		}
		v := a.value
		if kind, ok := spec.opts[v]; ok && i+1 < len(args) {
			if kind == kindPath {
				out = append(out, args[i+1])
			}
			i++
			continue
		}
		if a.isOption() {
			if name, val, ok := strings.Cut(v, "="); ok {
				if kind, ok := spec.opts[name]; ok {
					if kind == kindPath {
						out = append(out, literal(val))
					}
					continue
				}
			} else if len(v) > 2 && v[1] != '-' {
				if kind, ok := spec.opts[v[:2]]; ok {
					if kind == kindPath {
						out = append(out, literal(v[2:]))
					}
					continue
				}
			}
			out = append(out, a)
			continue
		}
		if firstOperand && !programGiven && spec.program != nil {
			firstOperand = false
			continue // the program or pattern
		}
		firstOperand = false
		out = append(out, a)
	}
	return out
}

// optionGiven reports whether v is one of opts, alone, with "=value" or
// with an attached short value.
func optionGiven(v string, opts map[string]bool) bool {
	for o := range opts {
		if v == o || strings.HasPrefix(v, o+"=") || (len(o) == 2 && len(v) > 2 && strings.HasPrefix(v, o) && v[1] != '-') {
			return true
		}
	}
	return false
}

func set(items ...string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, it := range items {
		m[it] = true
	}
	return m
}
