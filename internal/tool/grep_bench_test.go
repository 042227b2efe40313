package tool

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/workspace"
)

// goSrc returns the Go standard library source tree, or skips.
func goSrc(b *testing.B) string {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		b.Skipf("go env GOROOT: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "src")
}

// benchCase is one sub-benchmark of benchStdlib: its name and the tool's
// input.
type benchCase[In any] struct {
	name string
	in   In
}

// benchStdlib runs the tool newTool makes over $GOROOT/src, one
// sub-benchmark a case; a call that fails or answers an error fails it.
func benchStdlib[In any](b *testing.B, newTool func(*workspace.Root) Tool, cases []benchCase[In]) {
	root, err := workspace.Open(goSrc(b))
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	t := newTool(root)
	for _, bc := range cases {
		input, err := json.Marshal(bc.in)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				res, err := t.Run(b.Context(), Call{Input: input})
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %s", t.Spec().Name, err, res.Content)
				}
			}
		})
	}
}

// BenchmarkGrepStdlib runs the Grep tool over $GOROOT/src (about 11,000
// files, 150 MiB); bench/grep/run.sh compares the same searches with
// ripgrep.
func BenchmarkGrepStdlib(b *testing.B) {
	benchStdlib(b, NewGrep, []benchCase[GrepInput]{
		{"regexp", GrepInput{Pattern: `func \w+Context\(`}},
		{"literal", GrepInput{Pattern: `context.WithCancel`}},
		{"ignore_case", GrepInput{Pattern: `newrequest`, IgnoreCase: true}},
		{"no_literal", GrepInput{Pattern: `[A-Z]{4}\d{3}`}},
		{"many_matches", GrepInput{Pattern: `err != nil`, MaxResults: 1_000_000}},
	})
}

// BenchmarkLineMatcherNoLiteral scans the net/http sources (read once,
// about 2 MB) for the pattern without a literal, [A-Z]{4}\d{3}:
// class_run is the matcher as compiled (the class-run prefilter, then the
// regexp on candidate lines), regexp_only the same matcher without the
// prefilter (Go's regexp over blocks of lines); their ratio is the
// prefilter's gain.
func BenchmarkLineMatcherNoLiteral(b *testing.B) {
	files, err := filepath.Glob(filepath.Join(goSrc(b), "net", "http", "*.go"))
	if err != nil || len(files) == 0 {
		b.Fatalf("net/http sources: %v", err)
	}
	var data []byte
	for _, f := range files {
		content, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		data = append(data, content...)
	}
	for _, mode := range []string{"class_run", "regexp_only"} {
		b.Run(mode, func(b *testing.B) {
			m, err := compileLineMatcher(`[A-Z]{4}\d{3}`, false)
			if err != nil {
				b.Fatal(err)
			}
			if mode == "regexp_only" {
				m.run = nil
			}
			b.SetBytes(int64(len(data)))
			lines := 0
			for b.Loop() {
				lines = 0
				m.scan(data, func(int, int) { lines++ })
			}
			b.ReportMetric(float64(lines), "lines")
		})
	}
}
