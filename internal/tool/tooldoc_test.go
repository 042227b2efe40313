package tool

import (
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/piece"
)

func TestReadToolDoc(t *testing.T) {
	rtd := NewReadToolDoc()
	tests := []struct {
		name     string
		isError  bool
		contains []string
	}{
		{"WebFetch", false, []string{"# WebFetch", "firewall_block", "web.allow_hosts"}},
		{"DownloadFile", false, []string{"# DownloadFile", "input/"}},
		{"Nope", true, []string{`no guide for "Nope"`, "WebFetch", "Read"}},
		{"../tool.go", true, []string{"no guide"}},
		{"", true, []string{"no guide"}},
	}
	for _, tt := range tests {
		res := call(t, rtd, ReadToolDocInput{Name: tt.name})
		wantResult(t, res, tt.isError, tt.contains...)
	}
}

// TestEveryToolHasADoc: each tool this package builds that a piece can
// list has a guide whose title is its name.
func TestEveryToolHasADoc(t *testing.T) {
	known := map[string]bool{}
	for _, ti := range piece.KnownTools() {
		known[ti.Name] = ti.Implemented
	}
	for _, name := range []string{"Read", "Write", "Edit", "Glob", "Grep", "Bash", "WebFetch", "WebSearch", "DownloadFile", "ReadToolDoc", "SshExec", "SshUpload", "SshDownload"} {
		if !known[name] {
			t.Errorf("%s is not an implemented tool in piece.KnownTools", name)
		}
		doc, ok := ToolDoc(name)
		if !ok || !strings.HasPrefix(doc, "# "+name+"\n") {
			t.Errorf("ToolDoc(%s) = %q, %v", name, doc, ok)
		}
	}
	for _, name := range ToolDocNames() {
		if _, ok := known[name]; !ok {
			t.Errorf("guide %s.md names no known tool", name)
		}
	}
}
