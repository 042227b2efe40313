package llmtest

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestGeminiThought checks the Gemini wire format of a turn with thinking:
// a thought part first, then the text, then usage, streamed and not.
func TestGeminiThought(t *testing.T) {
	t.Parallel()
	turn := Turn{Thinking: "Weigh the options.", Text: []string{"Hel", "lo."}, InputTokens: 10, CacheReadTokens: 2, OutputTokens: 4}
	tests := []struct {
		method string
		want   []geminiPart // all parts, in order, across events
	}{
		{"streamGenerateContent?alt=sse", []geminiPart{{Text: "Weigh the options.", Thought: true}, {Text: "Hel"}, {Text: "lo."}, {Text: ""}}},
		{"generateContent", []geminiPart{{Text: "Weigh the options.", Thought: true}, {Text: "Hello."}}},
	}
	for _, tt := range tests {
		t.Run(strings.Split(tt.method, "?")[0], func(t *testing.T) {
			t.Parallel()
			s := NewServer(t, turn)
			client := &http.Client{Timeout: 10 * time.Second}
			resp, err := client.Post(s.URL()+"/v1beta/models/gemini-2.5-flash:"+tt.method, "application/json",
				strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			var events []geminiResponse
			if strings.HasPrefix(tt.method, "stream") {
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					data, ok := strings.CutPrefix(sc.Text(), "data: ")
					if !ok {
						continue
					}
					var ev geminiResponse
					if err := json.Unmarshal([]byte(data), &ev); err != nil {
						t.Fatalf("event %q: %v", data, err)
					}
					events = append(events, ev)
				}
			} else {
				var ev geminiResponse
				if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
					t.Fatal(err)
				}
				events = append(events, ev)
			}
			var parts []geminiPart
			for _, ev := range events {
				for _, c := range ev.Candidates {
					parts = append(parts, c.Content.Parts...)
				}
			}
			if diff := cmp.Diff(tt.want, parts); diff != "" {
				t.Errorf("parts (-want +got):\n%s", diff)
			}
			last := events[len(events)-1]
			wantUsage := &geminiUsage{PromptTokenCount: 12, CandidatesTokenCount: 4, TotalTokenCount: 16, CachedContentTokenCount: 2}
			if diff := cmp.Diff(wantUsage, last.UsageMetadata); diff != "" {
				t.Errorf("usage (-want +got):\n%s", diff)
			}
			if got := last.Candidates[0].FinishReason; got != "STOP" {
				t.Errorf("finishReason %q, want STOP", got)
			}
		})
	}
}
