package mcp

import (
	"slices"
	"strings"
	"testing"
)

func TestModelNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 60)
	slug64 := strings.Repeat("s", 64)
	cases := []struct {
		name   string
		server string
		tools  []string
		want   []string // "" where only the shape is checked (a hashed name)
	}{
		{"valid names keep theirs", "fs", []string{"read", "write-file", "a_b"}, []string{"mcp__fs__read", "mcp__fs__write-file", "mcp__fs__a_b"}},
		{"dot and slash", "fs", []string{"files.read", "repo/search"}, []string{"mcp__fs__files_read", "mcp__fs__repo_search"}},
		// files_read is the server's own: files.read must not take it.
		{"replaced name taken by a valid one", "fs", []string{"files.read", "files_read"}, []string{"", "mcp__fs__files_read"}},
		// Neither of two tools replacing to one name gets it, whatever the order.
		{"two replace alike", "fs", []string{"a.b", "a/b"}, []string{"", ""}},
		{"two replace alike, other order", "fs", []string{"a/b", "a.b"}, []string{"", ""}},
		{"unicode", "fs", []string{"読む", "書く", "café"}, []string{"", "", "mcp__fs__caf_"}},
		{"too long", "fs", []string{long, long + "b"}, []string{"", ""}},
		{"long server slug", slug64, []string{"x"}, []string{""}},
		{"empty list", "fs", nil, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ModelNames(tc.server, tc.tools)
			if len(got) != len(tc.tools) {
				t.Fatalf("ModelNames(%q, %q) = %q: not one name per tool", tc.server, tc.tools, got)
			}
			seen := map[string]bool{}
			for i, n := range got {
				if !ValidName(n) {
					t.Errorf("%q → %q: not a name model APIs accept", tc.tools[i], n)
				}
				if seen[n] {
					t.Errorf("%q → %q: another tool's name", tc.tools[i], n)
				}
				seen[n] = true
				if tc.want[i] != "" && n != tc.want[i] {
					t.Errorf("%q → %q, want %q", tc.tools[i], n, tc.want[i])
				}
				if tc.want[i] == "" && !strings.HasPrefix(n, Prefix+tc.server[:min(len(tc.server), MaxNameLen-len(Prefix)-hashLen-1)]) {
					t.Errorf("%q → %q: does not start with mcp__<server>", tc.tools[i], n)
				}
			}
			// Deterministic, and independent of the listing's order.
			if again := ModelNames(tc.server, tc.tools); !slices.Equal(again, got) {
				t.Errorf("second call = %q, first %q", again, got)
			}
			rev := slices.Clone(tc.tools)
			slices.Reverse(rev)
			revGot := ModelNames(tc.server, rev)
			slices.Reverse(revGot)
			if !slices.Equal(revGot, got) {
				t.Errorf("reversed listing gives %q, want %q", revGot, got)
			}
		})
	}
	// A hashed name keeps what it can of the tool's name.
	// docs/mcp.md gives this one.
	if n := ModelNames("fs", []string{"files.read", "files_read"})[0]; n != "mcp__fs__files_read_54b4a7da" {
		t.Errorf("files.read beside files_read → %q, want mcp__fs__files_read_54b4a7da (docs/mcp.md)", n)
	}
	// Servers differ: the same tool name hashes differently.
	a, b := ModelNames("a", []string{long})[0], ModelNames("b", []string{long})[0]
	if a[len(a)-hashLen:] == b[len(b)-hashLen:] {
		t.Errorf("%q and %q share a hash", a, b)
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"mcp__a__b": true, "a-b_C9": true, strings.Repeat("a", 64): true,
		"": false, strings.Repeat("a", 65): false, "a.b": false, "a/b": false, "é": false, "a b": false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}
