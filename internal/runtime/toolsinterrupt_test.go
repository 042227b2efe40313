package runtime

import (
	"context"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
)

// TestInterruptWhileToolsStart: a run interrupted while its tools are
// set up (an MCP server starting) is said as the loop says an interrupted
// run, not "Tools are unavailable: context canceled".
func TestInterruptWhileToolsStart(t *testing.T) {
	t.Parallel()
	waiting := make(chan struct{})
	h := newHarness(t, Config{Provider: &capture{}, Tools: func(ctx context.Context) (*tool.Set, error) {
		close(waiting)
		<-ctx.Done()
		return nil, ctx.Err()
	}}, ConnectOptions{})
	if err := h.handle(protocol.Prompt{Content: "hello"}); err != nil {
		t.Fatal(err)
	}
	<-waiting
	h.interruptWithin()
	errs := ofType[protocol.Error](h)
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "Operation aborted: the run was interrupted") {
		t.Errorf("errors = %+v, want the interrupted run's", errs)
	}
}
