package sandbox

import (
	"maps"
	"os"
	"slices"
	"strings"
)

// sandboxEnv is the complete environment of a sandboxed (bwrap or
// fallback) command: a fixed minimal set, the allowed host variables, then
// the caller's extra variables.
func (s *Sandbox) sandboxEnv(home, tmpdir string, extra map[string]string) map[string]string {
	env := map[string]string{
		"PATH":             sandboxPath,
		"HOME":             home,
		"LANG":             hostOr("LANG", "C.UTF-8"),
		"TZ":               hostOr("TZ", "UTC"),
		"PYTHONUNBUFFERED": "1",
		"TMPDIR":           tmpdir,
	}
	if len(s.envAllow) > 0 {
		for _, kv := range os.Environ() {
			k, v, ok := strings.Cut(kv, "=")
			if ok && envAllowed(s.envAllow, k) {
				env[k] = v
			}
		}
	}
	maps.Copy(env, extra)
	for k, v := range env {
		if !validEnv(k, v) {
			delete(env, k)
		}
	}
	return env
}

// hostEnv is the host environment with extra variables set (off mode).
func hostEnv(extra map[string]string) []string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	maps.Copy(env, extra)
	for k, v := range env {
		if !validEnv(k, v) {
			delete(env, k)
		}
	}
	return envList(env)
}

// envList renders an environment map as sorted KEY=VALUE strings.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// envAllowed reports whether name matches an allow entry: an exact name or
// a prefix ending in "*".
func envAllowed(allow []string, name string) bool {
	for _, a := range allow {
		if prefix, ok := strings.CutSuffix(a, "*"); ok {
			if prefix != "" && strings.HasPrefix(name, prefix) {
				return true
			}
		} else if a == name {
			return true
		}
	}
	return false
}

func validEnv(k, v string) bool {
	return k != "" && !strings.ContainsAny(k, "=\x00") && !strings.Contains(v, "\x00")
}

func hostOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
