package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// OpenAI Responses wire format.
//
// A streaming request is answered with named SSE events whose data carries
// the same "type" and a "sequence_number" counting from 0:
//
//	response.created, response.in_progress            (status in_progress)
//	for Turn.Thinking, a reasoning item:
//	  response.output_item.added, response.reasoning_summary_part.added,
//	  response.reasoning_summary_text.delta, response.reasoning_summary_text.done,
//	  response.reasoning_summary_part.done, response.output_item.done
//	for Turn.Text, a message item:
//	  response.output_item.added, response.content_part.added,
//	  response.output_text.delta (one per chunk), response.output_text.done,
//	  response.content_part.done, response.output_item.done
//	per tool call, a function_call item:
//	  response.output_item.added, response.function_call_arguments.delta
//	  (ToolCall.Fragments pieces), response.function_call_arguments.done,
//	  response.output_item.done
//	response.completed                                 (the full response)
//
// usage.input_tokens counts InputTokens + CacheReadTokens, and
// input_tokens_details.cached_tokens the cache reads, as OpenAI does
// (CacheWriteTokens is not reported). A non-streaming request is answered with the response object alone. Errors
// are HTTP error bodies, as for Chat Completions.

// responseObject is a Responses API response.
type responseObject struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	CreatedAt         int64           `json:"created_at"`
	Status            string          `json:"status"`
	Error             any             `json:"error"`
	IncompleteDetails any             `json:"incomplete_details"`
	Instructions      any             `json:"instructions"`
	MaxOutputTokens   any             `json:"max_output_tokens"`
	Model             string          `json:"model"`
	Output            []responseItem  `json:"output"`
	ParallelToolCalls bool            `json:"parallel_tool_calls"`
	Reasoning         map[string]any  `json:"reasoning"`
	Store             bool            `json:"store"`
	Temperature       float64         `json:"temperature"`
	Text              map[string]any  `json:"text"`
	ToolChoice        string          `json:"tool_choice"`
	Tools             any             `json:"tools"`
	TopP              float64         `json:"top_p"`
	Truncation        string          `json:"truncation"`
	Usage             *responsesUsage `json:"usage"`
}

// responseItem is an output item: a reasoning item, a message or a
// function call (only the fields of its type are set).
type responseItem struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Status string `json:"status,omitempty"`
	// reasoning
	Summary *[]responsePart `json:"summary,omitempty"`
	// message
	Role    string          `json:"role,omitempty"`
	Content *[]responsePart `json:"content,omitempty"`
	// function_call
	Arguments *string `json:"arguments,omitempty"`
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
}

// responsePart is an output_text content part or a summary_text part.
type responsePart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations *[]any `json:"annotations,omitempty"`
	Logprobs    *[]any `json:"logprobs,omitempty"`
}

type responsesUsage struct {
	InputTokens         int64          `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int64          `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int64          `json:"total_tokens"`
}

func outputText(text string) responsePart {
	return responsePart{Type: "output_text", Text: text, Annotations: &[]any{}, Logprobs: &[]any{}}
}

func summaryText(text string) responsePart { return responsePart{Type: "summary_text", Text: text} }

// responsesStream writes Responses events, numbering them.
type responsesStream struct {
	sse *sse
	seq int
}

// send writes one event; fields are merged with "type" and
// "sequence_number". It returns false once the stream is cut.
func (rs *responsesStream) send(typ string, fields map[string]any) bool {
	fields["type"] = typ
	fields["sequence_number"] = rs.seq
	rs.seq++
	return rs.sse.send(typ, fields)
}

// serveResponses answers in the OpenAI Responses format.
func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request, req map[string]any, turn Turn) {
	model := requestModel(req)
	if turn.Status != 0 {
		writeOpenAIError(w, turn, model)
		return
	}
	resp := responseObject{
		ID:                nextOpenAIID("resp_"),
		Object:            "response",
		CreatedAt:         time.Now().Unix(),
		Status:            "in_progress",
		Instructions:      req["instructions"],
		MaxOutputTokens:   req["max_output_tokens"],
		Model:             model,
		Output:            []responseItem{},
		ParallelToolCalls: true,
		Reasoning:         map[string]any{"effort": nil, "summary": nil},
		Temperature:       1,
		Text:              map[string]any{"format": map[string]any{"type": "text"}},
		ToolChoice:        "auto",
		Tools:             req["tools"],
		TopP:              1,
		Truncation:        "disabled",
	}
	if resp.Tools == nil {
		resp.Tools = []any{}
	}
	if reasoning, ok := req["reasoning"].(map[string]any); ok {
		resp.Reasoning = reasoning
	}
	if store, ok := req["store"].(bool); ok {
		resp.Store = store
	}
	final := completedResponse(resp, turn)

	if stream, _ := req["stream"].(bool); !stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(final)
		return
	}

	rs := &responsesStream{sse: newSSE(w, turn.CutAfter)}
	if !rs.send("response.created", map[string]any{"response": resp}) ||
		!rs.send("response.in_progress", map[string]any{"response": resp}) {
		return
	}
	call := 0
	for idx, item := range final.Output {
		n := 0
		if item.Type == "function_call" {
			n = turn.ToolCalls[call].Fragments
			call++
		}
		if n <= 0 {
			n = 2
		}
		if !streamResponseItem(rs, idx, item, turn.Text, n) {
			return
		}
	}
	rs.send("response.completed", map[string]any{"response": final})
}

// completedResponse is resp after the turn: its output items, usage and
// status completed.
func completedResponse(resp responseObject, turn Turn) responseObject {
	var out []responseItem
	if turn.Thinking != "" {
		out = append(out, responseItem{ID: nextOpenAIID("rs_"), Type: "reasoning", Summary: &[]responsePart{summaryText(turn.Thinking)}})
	}
	if len(turn.Text) > 0 {
		out = append(out, responseItem{
			ID: nextOpenAIID("msg_"), Type: "message", Status: "completed", Role: "assistant",
			Content: &[]responsePart{outputText(strings.Join(turn.Text, ""))},
		})
	}
	for i, tc := range turn.ToolCalls {
		out = append(out, responseItem{
			ID: fmt.Sprintf("fc_%03d", i), Type: "function_call", Status: "completed",
			Arguments: ptr(tc.Input), CallID: callID(tc, "call", i), Name: tc.Name,
		})
	}
	resp.Output = out
	if resp.Output == nil {
		resp.Output = []responseItem{}
	}
	resp.Status = "completed"
	input := turn.InputTokens + turn.CacheReadTokens
	resp.Usage = &responsesUsage{
		InputTokens:         input,
		InputTokensDetails:  map[string]int{"cached_tokens": int(turn.CacheReadTokens)},
		OutputTokens:        turn.OutputTokens,
		OutputTokensDetails: map[string]int{"reasoning_tokens": 0},
		TotalTokens:         input + turn.OutputTokens,
	}
	return resp
}

// respEvent is one Responses event before numbering.
type respEvent struct {
	typ    string
	fields map[string]any
}

// streamResponseItem streams one completed output item as its added /
// delta / done events: text deltas are the chunks, function arguments go
// in n fragments. It returns false once the stream is cut.
func streamResponseItem(rs *responsesStream, idx int, done responseItem, chunks []string, n int) bool {
	added := done
	switch done.Type {
	case "reasoning":
		added.Summary = &[]responsePart{}
	case "message":
		added.Status, added.Content = "in_progress", &[]responsePart{}
	case "function_call":
		added.Status, added.Arguments = "in_progress", ptr("")
	}
	events := []respEvent{{"response.output_item.added", map[string]any{"item": added}}}
	switch done.Type {
	case "reasoning":
		text := (*done.Summary)[0].Text
		events = append(events, respEvent{"response.reasoning_summary_part.added", map[string]any{"summary_index": 0, "part": summaryText("")}})
		for _, piece := range splitUTF8(text, 2) {
			events = append(events, respEvent{"response.reasoning_summary_text.delta", map[string]any{"summary_index": 0, "delta": piece}})
		}
		events = append(events,
			respEvent{"response.reasoning_summary_text.done", map[string]any{"summary_index": 0, "text": text}},
			respEvent{"response.reasoning_summary_part.done", map[string]any{"summary_index": 0, "part": summaryText(text)}})
	case "message":
		text := (*done.Content)[0].Text
		events = append(events, respEvent{"response.content_part.added", map[string]any{"content_index": 0, "part": outputText("")}})
		for _, chunk := range chunks {
			events = append(events, respEvent{"response.output_text.delta", map[string]any{"content_index": 0, "delta": chunk, "logprobs": []any{}}})
		}
		events = append(events,
			respEvent{"response.output_text.done", map[string]any{"content_index": 0, "text": text, "logprobs": []any{}}},
			respEvent{"response.content_part.done", map[string]any{"content_index": 0, "part": outputText(text)}})
	case "function_call":
		for _, piece := range splitUTF8(*done.Arguments, n) {
			events = append(events, respEvent{"response.function_call_arguments.delta", map[string]any{"delta": piece}})
		}
		events = append(events, respEvent{"response.function_call_arguments.done", map[string]any{"name": done.Name, "arguments": *done.Arguments}})
	}
	events = append(events, respEvent{"response.output_item.done", map[string]any{"item": done}})
	for _, ev := range events {
		ev.fields["output_index"] = idx
		if _, isItem := ev.fields["item"]; !isItem {
			ev.fields["item_id"] = done.ID
		}
		if !rs.send(ev.typ, ev.fields) {
			return false
		}
	}
	return true
}
