// Package prototest gives tests the protocol's schema validator, built
// once per test binary (building it is slow) and read-only afterwards. It
// imports only package protocol, so that the tests of any package above it
// can share the one validator.
package prototest

import (
	"sync"
	"testing"

	"github.com/maestro-run/maestro/internal/protocol"
)

var validator = sync.OnceValues(protocol.NewValidator)

// Validator returns the shared schema validator, failing t if it cannot be
// built.
func Validator(t testing.TB) *protocol.Validator {
	t.Helper()
	v, err := validator()
	if err != nil {
		t.Fatalf("build protocol validator: %v", err)
	}
	return v
}
