package tool

import (
	"context"
	"embed"
	"io/fs"
	"slices"
	"strings"
)

// toolDocs holds each tool's long guide, tooldocs/<Name>.md, which
// ReadToolDoc serves so that the per-call description can stay short.
//
//go:embed tooldocs/*.md
var toolDocs embed.FS

// ToolDoc returns the guide of the named tool.
func ToolDoc(name string) (string, bool) {
	if name == "" || strings.ContainsAny(name, "/.\\") {
		return "", false
	}
	b, err := fs.ReadFile(toolDocs, "tooldocs/"+name+".md")
	if err != nil {
		return "", false
	}
	return string(b), true
}

// ToolDocNames lists the tools that have a guide, sorted.
func ToolDocNames() []string {
	entries, _ := fs.ReadDir(toolDocs, "tooldocs") // embedded: cannot fail
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".md"))
	}
	slices.Sort(names)
	return names
}

// ReadToolDocInput is the input of the ReadToolDoc tool.
type ReadToolDocInput struct {
	Name string `json:"name" jsonschema:"the tool's name, e.g. WebFetch"`
}

// NewReadToolDoc returns the ReadToolDoc tool.
func NewReadToolDoc() Tool {
	return New("ReadToolDoc", "Read a tool's detailed guide (inputs, output, limits, errors) by the tool's name.", true,
		func(_ context.Context, in ReadToolDocInput, _ Call) (Result, error) {
			doc, ok := ToolDoc(in.Name)
			if !ok {
				return Failf(CodeNotFound, "ReadToolDoc: no guide for %q; guides exist for: %s", in.Name, strings.Join(ToolDocNames(), ", ")), nil
			}
			return Result{Content: doc}, nil
		})
}
