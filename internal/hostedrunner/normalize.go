package hostedrunner

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	volatileUUID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	volatileConn = regexp.MustCompile(`\b(conn|sub)_[0-9a-f]+(_[0-9a-z]+)?\b`)
	// volatileName is the drain time in a file name (manifestName).
	volatileName = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}_\d{2}_\d{2}_\d{3}Z`)
)

// Normalize rewrites a manifest (or any JSON document of the runner) for
// comparison with a golden file: the workspace directory becomes
// "/workspace", timestamps (keys ending in "_at", and the drain time in
// the names of session_file and manifest_path) "<time>", session UUIDs
// "<uuid>", connection and subscription ids "<conn>"/"<sub>"; the result
// is indented with sorted keys. It returns the input unchanged if it is
// not JSON.
func Normalize(doc []byte, workspace string) []byte {
	var v any
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return doc
	}
	roots := []string{workspace}
	if real, err := filepath.EvalSymlinks(workspace); err == nil && real != workspace {
		roots = append(roots, real)
	}
	v = normalizeValue("", v, roots)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return doc
	}
	return out.Bytes()
}

func normalizeValue(key string, v any, roots []string) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			v[k] = normalizeValue(k, x, roots)
		}
		return v
	case []any:
		for i, x := range v {
			v[i] = normalizeValue(key, x, roots)
		}
		return v
	case string:
		if strings.HasSuffix(key, "_at") && v != "" {
			return "<time>"
		}
		if key == "session_file" || key == "manifest_path" {
			v = volatileName.ReplaceAllString(v, "<time>")
		}
		for _, r := range roots {
			if v == r || strings.HasPrefix(v, r+string(filepath.Separator)) {
				v = "/workspace" + v[len(r):]
				break
			}
		}
		v = volatileUUID.ReplaceAllString(v, "<uuid>")
		return volatileConn.ReplaceAllStringFunc(v, func(s string) string {
			if strings.HasPrefix(s, "sub_") {
				return "<sub>"
			}
			return "<conn>"
		})
	}
	return v
}
