package tool

import "testing"

// BenchmarkGlobStdlib lists files of $GOROOT/src by pattern.
func BenchmarkGlobStdlib(b *testing.B) {
	benchStdlib(b, NewGlob, []benchCase[GlobInput]{
		{"**/*_test.go", GlobInput{Pattern: "**/*_test.go"}},
		{"net/http/*.go", GlobInput{Pattern: "net/http/*.go"}},
	})
}
