package mcp_test

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/maestro-run/maestro/internal/mcp"
)

// A reply in text is read into the server's form, or refused saying why.
func TestElicitationAnswer(t *testing.T) {
	t.Parallel()
	one := &sdk.ElicitParams{Message: "Colour?", RequestedSchema: map[string]any{"type": "object",
		"properties": map[string]any{"answer": map[string]any{"type": "string"}}, "required": []string{"answer"}}}
	form := &sdk.ElicitParams{Message: "Order", RequestedSchema: map[string]any{"type": "object",
		"properties": map[string]any{
			"size":  map[string]any{"type": "string", "enum": []string{"S", "M", "L"}},
			"count": map[string]any{"type": "integer"},
			"gift":  map[string]any{"type": "boolean"},
		}, "required": []string{"size", "count"}}}
	url := &sdk.ElicitParams{Mode: "url", Message: "Sign in", URL: "https://example.com/auth"}
	for _, tc := range []struct {
		name   string
		params *sdk.ElicitParams
		reply  string
		want   string // the answer as JSON, or "error: …"
	}{
		{"one field, the reply itself", one, "  green ", `{"action":"accept","content":{"answer":"green"}}`},
		{"one field, as a line", one, "answer: green", `{"action":"accept","content":{"answer":"green"}}`},
		{"decline", one, "Decline", `{"action":"decline"}`},
		{"cancel", one, "cancel.", `{"action":"cancel"}`},
		{"empty", one, " ", "error: the reply is empty"},
		{"JSON with another field", one, `{"colour":"green"}`, "error: the field answer is required"},
		{"lines", form, "size: M\ncount: 3\ngift: yes", `{"action":"accept","content":{"count":3,"gift":true,"size":"M"}}`},
		{"JSON", form, `{"size":"L","count":2}`, `{"action":"accept","content":{"count":2,"size":"L"}}`},
		{"not in the enum", form, "size: XL\ncount: 1", `error: the field size takes one of S, M, L, not "XL"`},
		{"not a whole number", form, "size: S\ncount: 1.5", "error: the field count takes a whole number"},
		{"not a number", form, "size: S\ncount: many", `error: the field count takes a number, not "many"`},
		{"not a boolean", form, "size: S\ncount: 1\ngift: perhaps", `error: the field gift takes true or false, not "perhaps"`},
		{"a required field missing", form, "size: S", "error: the field count is required"},
		{"an unknown field", form, "size: S\ncount: 1\ncolour: red", "error: the form has no field colour"},
		{"not a line", form, "just M please", `error: the line "just M please" is not "field: value"`},
		{"url accepted", url, "accept", `{"action":"accept"}`},
		{"url, other text", url, "done", `error: reply "accept", "decline" or "cancel"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := mcp.Answer(tc.params, tc.reply)
			got := ""
			if err != nil {
				got = "error: " + err.Error()
			} else {
				data, _ := json.Marshal(res)
				got = string(data)
			}
			if got != tc.want {
				t.Errorf("Answer(%q) = %s, want %s", tc.reply, got, tc.want)
			}
		})
	}
}

// The question names the server, its message, each field of the form
// (type, required, allowed values) and how to reply.
func TestElicitationQuestion(t *testing.T) {
	t.Parallel()
	q := mcp.Question("shop", &sdk.ElicitParams{Message: "Which size?", RequestedSchema: map[string]any{"type": "object",
		"properties": map[string]any{
			"size": map[string]any{"type": "string", "enum": []string{"S", "M"}, "description": "the shirt size"},
			"note": map[string]any{"type": "string"},
		}, "required": []string{"size"}}})
	want := "The MCP server shop asks: Which size?\n\nIts form:\n- size (string, required, one of S, M): the shirt size\n- note (string)\n\n" +
		`Reply with one "field: value" line per field, or a JSON object of the fields, or "decline" or "cancel".`
	if q != want {
		t.Errorf("Question =\n%s\nwant\n%s", q, want)
	}
	if q := mcp.Question("auth", &sdk.ElicitParams{Message: "Sign in", URL: "https://example.com/a"}); !strings.Contains(q, `Open https://example.com/a, then reply "accept"`) {
		t.Errorf("URL question = %q", q)
	}
}
