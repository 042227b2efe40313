package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/maestro-run/maestro/internal/llm/llmtest"
)

// --context-windows takes model=tokens pairs and names a bad one.
func TestParseWindows(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    map[string]int64
		wantErr string
	}{
		{"", map[string]int64{}, ""},
		{"a=32768, b=8192", map[string]int64{"a": 32768, "b": 8192}, ""},
		{"a=0", nil, `"a=0" is not model=tokens`},
		{"a", nil, `"a" is not model=tokens`},
		{"=5", nil, `"=5" is not model=tokens`},
	}
	for _, tc := range cases {
		got, err := parseWindows(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseWindows(%q) error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !cmp.Equal(got, tc.want) {
			t.Errorf("parseWindows(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// --listing takes the local servers' styles and names a bad one.
func TestParseListing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    llmtest.ListingStyle
		wantErr bool
	}{
		{"", llmtest.ListingContextLength, false},
		{"vllm", llmtest.ListingVLLM, false},
		{"llamacpp", llmtest.ListingLlamaCpp, false},
		{"lmstudio", llmtest.ListingLMStudio, false},
		{"ollama", llmtest.ListingOllama, false},
		{"openrouter", "", true},
	} {
		got, err := parseListing(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseListing(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
