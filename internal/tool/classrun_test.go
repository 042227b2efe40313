package tool

import (
	"math/rand/v2"
	"regexp/syntax"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRequiredClassRun: the run found for patterns without a literal
// (its length; 0 for none).
func TestRequiredClassRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern string
		want    int
	}{
		{`[A-Z]{4}\d{3}`, 7},
		{`\b[A-Z]{2,}\d+\b`, 2},    // AA (x{2,} is xx+), or the last letter and a digit
		{`[a-z]+_[0-9]`, 3},        // the plus's last letter, _, a digit
		{`(?:\d\d)-?\d{2}`, 2},     // the optional dash breaks the run
		{`[A-Z]*\d?`, 0},           // nothing required
		{`\w+\s\w+`, 3},            // \w \s \w
		{`.\d{3}`, 3},              // . admits characters beyond ASCII
		{`(?i)[a-z]{3}`, 0},        // folding brings in the Kelvin sign
		{`[é-ü]\d\d`, 2},           // non-ASCII class ends the run
		{`^\d{3}`, 3},              // (anchored patterns do not use it)
		{`[\n]\d`, 2},              // the newline-only class becomes empty
		{`(?:[A-Z]\d|\d[A-Z])`, 0}, // alternatives
		{`\d{40}`, maxClassRun},    // capped
	} {
		re, err := syntax.Parse(tc.pattern, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		if r := requiredClassRun(re.Simplify()); r != nil {
			got = len(r.sets)
		}
		if got != tc.want {
			t.Errorf("%q: run of %d classes, want %d", tc.pattern, got, tc.want)
		}
	}
	if m, err := compileLineMatcher(`[A-Z]{4}\d{3}`, false); err != nil || m.run == nil {
		t.Fatalf("the issue's pattern gets no class run (err %v)", err)
	}
}

// TestClassRunRandom is the differential test of the class-run path: on
// random patterns built from classes, literals, quantifiers, assertions
// and alternatives, and random text, the lines the matcher finds are
// exactly those Go's regexp matches line by line.
func TestClassRunRandom(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(22, 4))
	pieces := []string{`[A-Z]`, `\d`, `[a-c]`, `[^a\n]`, `\w`, `\s`, `.`, `[0-9A-F]`, `\b`, `\B`, `$`, `[é-ü]`, `(?:\d[A-Z])`}
	quants := []string{"", "", "", "+", "*", "?", "{2}", "{1,3}", "{2,}"}
	const alphabet = "aAbBcCFZ0199 \t\n-_é\u212a"
	runes := []rune(alphabet)
	used := 0
	for range 3000 {
		var p strings.Builder
		for range 1 + rng.IntN(5) {
			p.WriteString(pieces[rng.IntN(len(pieces))])
			p.WriteString(quants[rng.IntN(len(quants))])
		}
		pattern := p.String()
		if rng.IntN(8) == 0 {
			pattern += "|" + pieces[rng.IntN(len(pieces))] + `\d`
		}
		var text strings.Builder
		for range 300 {
			text.WriteRune(runes[rng.IntN(len(runes))])
		}
		// Not ending with a newline: what follows the last one is not a
		// line to Grep (scanLines would count it).
		text.WriteByte('.')
		for _, ic := range []bool{false, true} {
			m, want, got := scanLines(t, pattern, ic, []byte(text.String()))
			if m.run != nil {
				used++
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("pattern %q ignore case %v on %q (-want +got):\n%s", pattern, ic, text.String(), diff)
			}
		}
	}
	if used < 1000 {
		t.Errorf("only %d of 6000 random patterns used the class run", used)
	}
}
