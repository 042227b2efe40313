package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
)

// The agents of one run share their notices: unknown pricing is said
// once, not once per agent run (issue 15 item 10: a piece run said it 6×).
func TestUnknownPricingOncePerRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		notices *Notices
		want    int
	}{
		{"shared notices", &Notices{}, 1},
		{"no notices: once per agent run", nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			for range 3 {
				p := &script{model: "llama3.2", turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
					say(llm.Usage{InputTokens: 5, OutputTokens: 5}, []string{"a"}),
				}}
				if _, err := New(Config{Provider: p, Notices: tc.notices}).Run(t.Context(), nil, llm.UserText("go"), rec); err != nil {
					t.Fatal(err)
				}
			}
			n := 0
			for _, st := range of[protocol.Status](rec) {
				if strings.Contains(st.Message, "Pricing unknown for model llama3.2") {
					n++
				}
			}
			if n != tc.want {
				t.Errorf("%d pricing notices, want %d", n, tc.want)
			}
		})
	}
}
