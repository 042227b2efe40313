package mcp

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An elicitation asked of someone who answers in text (a queued job's
// question, answered by a comment; docs/mcp.md, "Elicitation in queued
// jobs"): Question says what the server asks and the form it wants,
// Answer reads the reply back into the server's form.

// formField is one field of an elicitation's form (a top-level property
// of its requested schema).
type formField struct {
	Name, Type, Title, Description string
	Enum                           []string
	Required                       bool
}

// formFields reads the requested schema's top-level properties, in the
// schema's order when it can be told (required first), else by name.
func formFields(p *sdk.ElicitParams) ([]formField, error) {
	if p.RequestedSchema == nil {
		return nil, nil
	}
	data, err := json.Marshal(p.RequestedSchema)
	if err != nil {
		return nil, fmt.Errorf("read the requested schema: %w", err)
	}
	var s struct {
		Properties map[string]struct {
			Type        string `json:"type"`
			Title       string `json:"title"`
			Description string `json:"description"`
			Enum        []any  `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("read the requested schema: %w", err)
	}
	var out []formField
	for name, prop := range s.Properties {
		f := formField{Name: name, Type: prop.Type, Title: prop.Title, Description: prop.Description, Required: slices.Contains(s.Required, name)}
		for _, v := range prop.Enum {
			f.Enum = append(f.Enum, fmt.Sprint(v))
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b formField) int {
		if a.Required != b.Required {
			if a.Required {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// Question is the text of an elicitation put to a person: the server's
// message, the fields of its form (type, required, allowed values) and
// how to answer.
func Question(server string, p *sdk.ElicitParams) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The MCP server %s asks: %s\n", server, strings.TrimSpace(p.Message))
	if p.URL != "" {
		fmt.Fprintf(&b, "\nOpen %s, then reply \"accept\" when done, \"decline\" or \"cancel\".", p.URL)
		return b.String()
	}
	fields, err := formFields(p)
	if err != nil || len(fields) == 0 {
		b.WriteString("\nReply \"accept\", \"decline\" or \"cancel\".")
		return b.String()
	}
	b.WriteString("\nIts form:\n")
	for _, f := range fields {
		fmt.Fprintf(&b, "- %s (%s", f.Name, cmp.Or(f.Type, "any"))
		if f.Required {
			b.WriteString(", required")
		}
		if len(f.Enum) > 0 {
			fmt.Fprintf(&b, ", one of %s", strings.Join(f.Enum, ", "))
		}
		b.WriteString(")")
		if d := cmp.Or(f.Description, f.Title); d != "" {
			b.WriteString(": " + d)
		}
		b.WriteString("\n")
	}
	if len(fields) == 1 {
		fmt.Fprintf(&b, "\nReply with the %s itself, a JSON object of the fields, or \"decline\" or \"cancel\".", fields[0].Name)
	} else {
		b.WriteString("\nReply with one \"field: value\" line per field, or a JSON object of the fields, or \"decline\" or \"cancel\".")
	}
	return b.String()
}

// Answer reads a person's reply to the elicitation p into the server's
// answer: "decline" or "cancel" (alone) are those actions; anything else
// accepts, with the form's content from a JSON object, "field: value"
// lines, or — for a form of one field — the whole reply. An error says
// why the reply does not fit the form.
func Answer(p *sdk.ElicitParams, reply string) (*sdk.ElicitResult, error) {
	reply = strings.TrimSpace(reply)
	switch strings.ToLower(strings.Trim(reply, ".!\"'` ")) {
	case "decline":
		return &sdk.ElicitResult{Action: "decline"}, nil
	case "cancel":
		return &sdk.ElicitResult{Action: "cancel"}, nil
	case "accept":
		if p.URL != "" {
			return &sdk.ElicitResult{Action: "accept"}, nil
		}
	}
	if reply == "" {
		return nil, errors.New("the reply is empty")
	}
	if p.URL != "" {
		return nil, errors.New(`reply "accept", "decline" or "cancel"`)
	}
	fields, err := formFields(p)
	if err != nil {
		return nil, err
	}
	raw := map[string]any{}
	switch {
	case strings.HasPrefix(reply, "{"):
		if err := json.Unmarshal([]byte(reply), &raw); err != nil {
			return nil, fmt.Errorf("the reply is not a JSON object: %w", err)
		}
	case len(fields) == 1 && !strings.HasPrefix(reply, fields[0].Name+":"):
		raw[fields[0].Name] = reply
	default:
		for line := range strings.Lines(reply) {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("the line %q is not \"field: value\"", strings.TrimSpace(line))
			}
			raw[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	content := map[string]any{}
	for _, f := range fields {
		v, ok := raw[f.Name]
		if !ok {
			if f.Required {
				return nil, fmt.Errorf("the field %s is required", f.Name)
			}
			continue
		}
		delete(raw, f.Name)
		if content[f.Name], err = fieldValue(f, v); err != nil {
			return nil, err
		}
	}
	if len(fields) > 0 && len(raw) > 0 {
		for k := range raw {
			return nil, fmt.Errorf("the form has no field %s", k)
		}
	}
	if len(fields) == 0 {
		content = raw
	}
	return &sdk.ElicitResult{Action: "accept", Content: content}, nil
}

// fieldValue converts v (text from a line, or a JSON value) to f's type.
func fieldValue(f formField, v any) (any, error) {
	s, isText := v.(string)
	var out any = v
	switch f.Type {
	case "string":
		if !isText {
			return nil, fmt.Errorf("the field %s takes text", f.Name)
		}
	case "number", "integer":
		var n float64
		switch x := v.(type) {
		case float64:
			n = x
		case string:
			var err error
			if n, err = strconv.ParseFloat(strings.TrimSpace(x), 64); err != nil {
				return nil, fmt.Errorf("the field %s takes a number, not %q", f.Name, x)
			}
		default:
			return nil, fmt.Errorf("the field %s takes a number", f.Name)
		}
		if f.Type == "integer" && n != float64(int64(n)) {
			return nil, fmt.Errorf("the field %s takes a whole number", f.Name)
		}
		out = n
		if f.Type == "integer" {
			out = int64(n)
		}
	case "boolean":
		switch x := v.(type) {
		case bool:
		case string:
			b, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(x)))
			if err != nil {
				switch strings.ToLower(strings.TrimSpace(x)) {
				case "yes", "y":
					b, err = true, nil
				case "no", "n":
					b, err = false, nil
				}
			}
			if err != nil {
				return nil, fmt.Errorf("the field %s takes true or false, not %q", f.Name, x)
			}
			out = b
		default:
			return nil, fmt.Errorf("the field %s takes true or false", f.Name)
		}
	}
	if len(f.Enum) > 0 && !slices.Contains(f.Enum, fmt.Sprint(out)) {
		if isText {
			return nil, fmt.Errorf("the field %s takes one of %s, not %q", f.Name, strings.Join(f.Enum, ", "), s)
		}
		return nil, fmt.Errorf("the field %s takes one of %s", f.Name, strings.Join(f.Enum, ", "))
	}
	return out, nil
}
