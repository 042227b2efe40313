package storetest

import (
	"context"
	"testing"

	"github.com/maestro-run/maestro/internal/store"
)

// ErrCompleter is a store that can complete jobs without reading them back
// (the SQL stores' CompleteManyErrs, which a queue.Pool's completer uses):
// CompleteMany's outcomes without the jobs.
type ErrCompleter interface {
	CompleteManyErrs(ctx context.Context, cs []store.Completion) []error
}

// testCompleteManyErrs: a store's CompleteManyErrs, if it has one, does
// what CompleteMany does (testCompleteMany) and reports the same error per
// item: fenced per lease, a status event each, the parent of a last
// subtask resumed, a bad item failing alone.
func testCompleteManyErrs(t *testing.T, b *bundle) {
	ec, ok := b.s.(ErrCompleter)
	if !ok {
		t.Skip("the store has no CompleteManyErrs")
	}
	checkCompleteBatch(t, b, "CompleteManyErrs", func(cs []store.Completion) []error {
		return ec.CompleteManyErrs(b.ctx, cs)
	})
}
