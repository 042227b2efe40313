package tool

import (
	"encoding/json"
	"testing"

	"github.com/maestro-run/maestro/internal/workspace"
)

// BenchmarkGlobStdlib lists files of $GOROOT/src by pattern.
func BenchmarkGlobStdlib(b *testing.B) {
	root, err := workspace.Open(goSrc(b))
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	globTool := NewGlob(root)
	for _, pattern := range []string{"**/*_test.go", "net/http/*.go"} {
		input, err := json.Marshal(GlobInput{Pattern: pattern})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(pattern, func(b *testing.B) {
			for b.Loop() {
				res, err := globTool.Run(b.Context(), Call{Input: input})
				if err != nil || res.IsError {
					b.Fatalf("Glob: %v %s", err, res.Content)
				}
			}
		})
	}
}
