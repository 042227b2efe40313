package llmtest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// Gemini API (generativelanguage v1beta) wire format, as Gemini CLI calls it.
//
//	POST /v1beta/models/<model>:streamGenerateContent?alt=sse
//	POST /v1beta/models/<model>:generateContent
//	POST /v1beta/models/<model>:countTokens
//
// A streaming request is answered with data-only SSE events, each a
// GenerateContentResponse: Turn.Thinking as a part with thought: true, one
// event per Turn.Text element, then one event per tool call (a
// functionCall part with the parsed ToolCall.Input as args), and a final
// event with finishReason STOP and usageMetadata. promptTokenCount counts
// InputTokens + CacheReadTokens and cachedContentTokenCount the cache
// reads, as Gemini does. generateContent answers the same content as one
// JSON object; when generationConfig.responseJsonSchema (or
// responseSchema) is present and the turn has no text, it answers a JSON
// object built from the schema's properties, which is what Gemini CLI's
// model router expects. countTokens never consumes a turn. An error turn
// is answered with Google's error body {error:{code, message, status}}.

// GeminiRoute is the route pattern of the Gemini API on the shared mux.
const GeminiRoute = "POST /v1beta/models/{action}"

type geminiPart struct {
	Text         string          `json:"text,omitempty"`
	Thought      bool            `json:"thought,omitempty"`
	FunctionCall *geminiFunction `json:"functionCall,omitempty"`
}

type geminiFunction struct {
	ID   string         `json:"id,omitempty"`
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiCandidate struct {
	Content      geminiContent `json:"content"`
	FinishReason string        `json:"finishReason,omitempty"`
	Index        int           `json:"index"`
}

type geminiUsage struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount,omitempty"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount,omitempty"`
}

type geminiResponse struct {
	Candidates    []geminiCandidate `json:"candidates"`
	UsageMetadata *geminiUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string            `json:"modelVersion,omitempty"`
	ResponseID    string            `json:"responseId,omitempty"`
}

// serveGeminiRoute dispatches on the ":method" suffix of the model segment.
func (s *Server) serveGeminiRoute(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	model, method, ok := strings.Cut(action, ":")
	if !ok {
		http.Error(w, "llmtest: expected models/<model>:<method>", http.StatusNotFound)
		return
	}
	switch method {
	case "countTokens":
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"totalTokens":12}`)
	case "streamGenerateContent", "generateContent":
		s.modelCall(func(w http.ResponseWriter, r *http.Request, req map[string]any, turn Turn) {
			s.serveGemini(w, req, turn, model, method == "streamGenerateContent")
		})(w, r)
	default:
		http.Error(w, "llmtest: unknown Gemini method "+method, http.StatusNotFound)
	}
}

func (s *Server) serveGemini(w http.ResponseWriter, req map[string]any, turn Turn, model string, stream bool) {
	if turn.Status != 0 {
		writeGeminiError(w, turn)
		return
	}
	usage := &geminiUsage{
		PromptTokenCount:        turn.InputTokens + turn.CacheReadTokens,
		CandidatesTokenCount:    turn.OutputTokens,
		TotalTokenCount:         turn.InputTokens + turn.CacheReadTokens + turn.OutputTokens,
		CachedContentTokenCount: turn.CacheReadTokens,
	}
	respID := nextOpenAIID("gem-")
	var calls []geminiPart
	for i, tc := range turn.ToolCalls {
		args := map[string]any{}
		if tc.Input != "" {
			if err := json.Unmarshal([]byte(tc.Input), &args); err != nil {
				http.Error(w, "llmtest: tool call input is not a JSON object: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		calls = append(calls, geminiPart{FunctionCall: &geminiFunction{ID: callID(tc, "call", i), Name: tc.Name, Args: args}})
	}
	if !stream {
		var parts []geminiPart
		if turn.Thinking != "" {
			parts = append(parts, geminiPart{Text: turn.Thinking, Thought: true})
		}
		text := strings.Join(turn.Text, "")
		if text == "" && len(calls) == 0 {
			text = schemaAnswer(req)
		}
		if text != "" {
			parts = append(parts, geminiPart{Text: text})
		}
		parts = append(parts, calls...)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(geminiResponse{
			Candidates:    []geminiCandidate{{Content: geminiContent{Role: "model", Parts: parts}, FinishReason: "STOP"}},
			UsageMetadata: usage, ModelVersion: model, ResponseID: respID,
		})
		return
	}
	e := newSSE(w, turn.CutAfter)
	chunk := func(parts []geminiPart, finish string, u *geminiUsage) bool {
		return e.send("", geminiResponse{
			Candidates:    []geminiCandidate{{Content: geminiContent{Role: "model", Parts: parts}, FinishReason: finish}},
			UsageMetadata: u, ModelVersion: model, ResponseID: respID,
		})
	}
	if turn.Thinking != "" && !chunk([]geminiPart{{Text: turn.Thinking, Thought: true}}, "", nil) {
		return
	}
	for _, t := range turn.Text {
		if !chunk([]geminiPart{{Text: t}}, "", nil) {
			return
		}
	}
	for _, c := range calls {
		if !chunk([]geminiPart{c}, "", nil) {
			return
		}
	}
	chunk([]geminiPart{{Text: ""}}, "STOP", usage)
}

// schemaAnswer builds a JSON object fitting generationConfig's response
// schema: strings "llmtest", numbers 1, booleans false; "" without one.
func schemaAnswer(req map[string]any) string {
	gc, _ := req["generationConfig"].(map[string]any)
	schema, _ := gc["responseJsonSchema"].(map[string]any)
	if schema == nil {
		schema, _ = gc["responseSchema"].(map[string]any)
	}
	if schema == nil {
		return ""
	}
	out := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		pm, _ := p.(map[string]any)
		typ, _ := pm["type"].(string)
		switch strings.ToLower(typ) {
		case "number", "integer":
			out[name] = 1
		case "boolean":
			out[name] = false
		case "array":
			out[name] = []any{}
		case "object":
			out[name] = map[string]any{}
		default:
			if enum, ok := pm["enum"].([]any); ok && len(enum) > 0 {
				out[name] = enum[0]
			} else {
				out[name] = "llmtest"
			}
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func writeGeminiError(w http.ResponseWriter, turn Turn) {
	status, msg := "INVALID_ARGUMENT", turn.ErrorMessage
	switch code := turn.Status; {
	case code == http.StatusUnauthorized:
		status = "UNAUTHENTICATED"
		if msg == "" {
			msg = "API key not valid. Please pass a valid API key."
		}
	case code == http.StatusForbidden:
		status = "PERMISSION_DENIED"
	case code == http.StatusNotFound:
		status = "NOT_FOUND"
	case code == http.StatusTooManyRequests:
		status = "RESOURCE_EXHAUSTED"
		if msg == "" {
			msg = "Resource has been exhausted (e.g. check quota)."
		}
	case code >= 500:
		status = "INTERNAL"
	}
	if msg == "" {
		msg = http.StatusText(turn.Status)
	}
	if turn.RetryAfter != "" {
		w.Header().Set("Retry-After", turn.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(turn.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": turn.Status, "message": msg, "status": status}})
}
