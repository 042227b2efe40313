// Package secretstest makes secret boxes for tests.
package secretstest

import (
	"bytes"
	"testing"

	"github.com/maestro-run/maestro/internal/secrets"
)

// Box is a box whose key is KeySize copies of b: two boxes of the same b
// open each other's sealed values, boxes of different b do not.
func Box(tb testing.TB, b byte) *secrets.Box {
	tb.Helper()
	box, err := secrets.New(bytes.Repeat([]byte{b}, secrets.KeySize))
	if err != nil {
		tb.Fatal(err)
	}
	return box
}
