package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/protocol"
	"github.com/maestro-run/maestro/internal/tool"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	long := "go test " + strings.Repeat("x", 80)
	for _, tc := range []struct {
		name, tool, args string
		want             Display
	}{
		{"write", "Write", `{"path":"notes.txt","content":"hello"}`, Display{"Write", "Write notes.txt", "Write 5 bytes to notes.txt"}},
		{"edit", "Edit", `{"path":"main.go","old":"a","new":"b"}`, Display{"Edit", "Edit main.go", "Replace text in main.go"}},
		{"bash folds white space", "Bash", `{"command":"go   test\n ./..."}`, Display{"Bash", "Run go test ./...", "Run the shell command `go test ./...` in the workspace"}},
		{"bash long command cut", "Bash", `{"command":"` + long + `"}`, Display{"Bash", "Run " + long[:59] + "…", "Run the shell command `" + long[:59] + "…` in the workspace"}},
		{"write without path", "Write", `{"content":"x"}`, Display{Name: "Write"}},
		{"read-only tool", "Read", `{"path":"a.txt"}`, Display{Name: "Read"}},
		{"bad arguments", "Bash", `not json`, Display{Name: "Bash"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, Describe(tc.tool, []byte(tc.args))); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSummaryLabels: response_end's tools_summary.summary_labels lists the
// labels of the run's calls so far (unique, in order, failed calls
// included), and is absent while no call had a label.
func TestSummaryLabels(t *testing.T) {
	t.Parallel()
	type in struct {
		Path    string `json:"path"`
		Content string `json:"content"`
		Command string `json:"command"`
	}
	mk := func(name string, readOnly, fail bool) tool.Tool {
		return tool.New(name, "test tool", readOnly, func(context.Context, in, tool.Call) (tool.Result, error) {
			if fail {
				return tool.Errorf("boom"), nil
			}
			return tool.Result{Content: "ok"}, nil
		})
	}
	p := &script{turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
		say(llm.Usage{}, nil, call("r", "Read", `{"path":"a.txt"}`)),
		say(llm.Usage{}, nil, call("w1", "Write", `{"path":"a.txt","content":"x"}`), call("b", "Bash", `{"command":"make test"}`)),
		say(llm.Usage{}, nil, call("w2", "Write", `{"path":"a.txt","content":"y"}`), call("e", "Edit", `{"path":"b.go"}`)),
		say(llm.Usage{}, []string{"done"}),
	}}
	tools := tool.NewSet(mk("Read", true, false), mk("Write", false, false), mk("Bash", false, true), mk("Edit", false, false))
	rec := &recorder{}
	res, err := New(Config{Provider: p, Tools: tools}).Run(t.Context(), nil, llm.UserText("go"), rec)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, e := range of[protocol.ResponseEnd](rec) {
		got = append(got, e.ToolsSummary.SummaryLabels)
	}
	want := [][]string{
		nil,
		nil,
		{"Write a.txt", "Run make test"},
		{"Write a.txt", "Run make test", "Edit b.go"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("summary_labels per response_end (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[3], res.Tools.SummaryLabels); diff != "" {
		t.Errorf("Result.Tools.SummaryLabels (-want +got):\n%s", diff)
	}
}

// TestSummaryLabelsBounded: at most maxSummaryLabels labels are kept.
func TestSummaryLabelsBounded(t *testing.T) {
	t.Parallel()
	var calls []llm.ToolCall
	for i := range maxSummaryLabels + 5 {
		calls = append(calls, call(string(rune('a'+i)), "Bash", `{"command":"echo `+string(rune('a'+i))+`"}`))
	}
	p := &script{turns: []func(context.Context, *llm.Request, func(llm.Event, error) bool){
		say(llm.Usage{}, nil, calls...),
		say(llm.Usage{}, []string{"done"}),
	}}
	bash := tool.New("Bash", "test tool", false, func(context.Context, struct {
		Command string `json:"command"`
	}, tool.Call) (tool.Result, error) {
		return tool.Result{Content: "ok"}, nil
	})
	res, err := New(Config{Provider: p, Tools: tool.NewSet(bash)}).Run(t.Context(), nil, llm.UserText("go"), &recorder{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Tools.SummaryLabels); n != maxSummaryLabels || res.Tools.SummaryLabels[0] != "Run echo a" {
		t.Errorf("summary_labels = %q, want the first %d", res.Tools.SummaryLabels, maxSummaryLabels)
	}
}
