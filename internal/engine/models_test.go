package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm"
	"github.com/maestro-run/maestro/internal/llm/replay"
)

// live makes a scripted provider look like a live one (the engine plays a
// replay run's script whatever model a piece names).
type live struct{ llm.Provider }

func (live) Name() string { return "fake" }

// scripted is a live-looking provider that answers with one control tool
// call, recording its requests.
func scripted(t *testing.T, call, input string) *recording {
	t.Helper()
	s := mustParse(t, fmt.Sprintf(`{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"m","description":"d",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["transition","complete"]},
"frames":[{"index":0,"statements":[{"kind":"tool_call","tool":%q,"id":"c1","input":%s}]}]}`, call, input))
	return &recording{Provider: live{replay.New(s)}}
}

// A piece's model runs its movements, a movement's own model wins, and a
// provider that cannot be used fails the movement with an error naming
// the piece, the movement and the model; the classifier runs on
// ClassifierProvider when set (issue 15 item 8).
func TestPieceAndMovementModels(t *testing.T) {
	t.Parallel()
	t.Run("each movement on its model", func(t *testing.T) {
		t.Parallel()
		pieceModel := scripted(t, "transition", `{"next":"second","summary":"handed over"}`)
		movementModel := scripted(t, "complete", `{"status":"success","result":"done"}`)
		runModel := scripted(t, "complete", `{"status":"aborted","result":"the run's model was used"}`)
		var asked []string
		h := newHarness(t, "chain", func(c *Config) {
			c.Provider = runModel
			c.Models = func(_ context.Context, spec string) (llm.Provider, error) {
				asked = append(asked, spec)
				return map[string]llm.Provider{"openai/piece-model": pieceModel, "openai/movement-model": movementModel}[spec], nil
			}
		})
		out, err := h.start("models", "Do it.")
		if err != nil || out.Status != StatusSucceeded || out.Result != "done" {
			t.Fatalf("outcome = %+v, %v", out, err)
		}
		if diff := cmp.Diff([]string{"openai/piece-model", "openai/movement-model"}, asked); diff != "" {
			t.Errorf("models asked for (-want +got):\n%s", diff)
		}
		if n := [3]int{len(pieceModel.requests()), len(movementModel.requests()), len(runModel.requests())}; n != [3]int{1, 1, 0} {
			t.Errorf("requests to the piece's, the movement's and the run's model = %v, want [1 1 0]", n)
		}
	})
	t.Run("a provider that is not configured", func(t *testing.T) {
		t.Parallel()
		pieceModel := scripted(t, "transition", `{"next":"second","summary":"handed over"}`)
		h := newHarness(t, "chain", func(c *Config) {
			c.Provider = scripted(t, "complete", `{"status":"success","result":"x"}`)
			c.Models = func(_ context.Context, spec string) (llm.Provider, error) {
				if spec == "openai/piece-model" {
					return pieceModel, nil
				}
				return nil, errors.New("provider openai is not configured (set OPENAI_API_KEY)")
			}
		})
		_, err := h.start("models", "Do it.")
		const want = `movement second of piece models names model "openai/movement-model": provider openai is not configured (set OPENAI_API_KEY)`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error = %v, want it to say %q", err, want)
		}
	})
	t.Run("a replay run plays its script", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "chain", func(c *Config) {
			c.Models = func(context.Context, string) (llm.Provider, error) {
				return nil, errors.New("asked for a model on replay")
			}
		})
		h.prov = &recording{Provider: replay.New(mustParse(t, `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"r","description":"d",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["transition","complete"]},
"frames":[{"index":0,"statements":[{"kind":"tool_call","tool":"transition","id":"c1","input":{"next":"second","summary":"s"}}]},
{"index":1,"statements":[{"kind":"tool_call","tool":"complete","id":"c2","input":{"status":"success","result":"replayed"}}]}]}`))}
		h.cfg.Provider = h.prov
		out, err := h.start("models", "Do it.")
		if err != nil || out.Result != "replayed" {
			t.Errorf("outcome = %+v, %v", out, err)
		}
	})
	t.Run("the classifier model", func(t *testing.T) {
		t.Parallel()
		classifier := &recording{Provider: live{replay.New(mustParse(t, `{"schemaVersion":"evalops.maestro.scripted-scenario.v1","id":"c","description":"d",
"metadata":{"recordedAt":"2026-11-26T00:00:00Z","toolsExpected":["transition","complete"]},
"frames":[{"index":0,"statements":[{"kind":"text","text":"{\"piece\": \"chat\", \"reason\": \"a greeting\"}"}]}]}`))}}
		runModel := scripted(t, "complete", `{"status":"success","result":"Hello!"}`)
		builtins, err := NewLibrary(t.Context(), nil, "")
		if err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, "chain", func(c *Config) { c.Provider, c.ClassifierProvider, c.Library = runModel, classifier, builtins })
		out, err := h.launch(Launch{Task: "Say hello.", RunID: "run_classify"})
		if err != nil || out.Piece != "chat" || out.Result != "Hello!" {
			t.Fatalf("outcome = %+v, %v", out, err)
		}
		if len(classifier.requests()) != 1 || len(runModel.requests()) != 1 {
			t.Errorf("requests: classifier %d, run model %d; want 1 each", len(classifier.requests()), len(runModel.requests()))
		}
	})
}

func mustParse(t *testing.T, src string) *replay.Scenario {
	t.Helper()
	s, err := replay.Parse([]byte(src), "inline.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
