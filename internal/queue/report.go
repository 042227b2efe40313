package queue

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/workspace"
)

// Bounds of a progress comment.
const (
	reportResultRunes  = 1500 // the result or error, clipped
	reportDeliverables = 20   // paths named; the rest are counted
)

// jobCost is what a job's model calls cost, for its progress comment.
type jobCost struct {
	res        Result
	known      bool
	replay     bool
	modelCalls int
}

// report is the progress comment of a job that ends with res (Result's
// Report): its outcome and result, the files under output/ of its
// workspace (the deliverables) and the cost; "" while it waits.
func report(piece string, c jobCost, root *workspace.Root) string {
	res := c.res
	var b strings.Builder
	what := "The job"
	if piece != "" {
		what = "The " + piece + " run"
	}
	switch res.State {
	case store.StateSucceeded:
		fmt.Fprintf(&b, "%s succeeded.\n\n%s\n", what, clipRunes(strings.TrimSpace(res.Result), reportResultRunes))
	case store.StateAborted, store.StateFailed:
		fmt.Fprintf(&b, "%s %s: %s\n", what, res.State, clipRunes(strings.TrimSpace(res.Error), reportResultRunes))
	default:
		return ""
	}
	files, more := deliverables(root)
	switch {
	case len(files) == 0:
		b.WriteString("\nDeliverables: none under output/.\n")
	default:
		fmt.Fprintf(&b, "\nDeliverables (%d): %s", len(files)+more, strings.Join(files, ", "))
		if more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
		b.WriteString(".\n")
	}
	cost := fmt.Sprintf("$%.4f", res.CostUSD)
	switch {
	case c.replay:
		cost = "$0 (replay: no model was called)"
	case !c.known:
		cost += " (pricing unknown for this model)"
	}
	fmt.Fprintf(&b, "Cost: %s · %d model call(s) · tokens in %d, out %d.", cost, c.modelCalls, res.Usage.InputTokens, res.Usage.OutputTokens)
	return b.String()
}

// deliverables lists the regular files under output/ of root (paths
// relative to root, sorted; the first reportDeliverables the walk finds)
// and how many more there are.
func deliverables(root *workspace.Root) (files []string, more int) {
	out, err := root.OpenDir("output")
	if err != nil {
		return nil, 0
	}
	defer out.Close()
	_ = out.Walk(workspace.WalkLimits{}, func(rel string, e fs.DirEntry) error {
		if !e.Type().IsRegular() {
			return nil
		}
		if len(files) == reportDeliverables {
			more++
		} else {
			files = append(files, path.Join("output", rel))
		}
		return nil
	})
	slices.Sort(files)
	return files, more
}

// clipRunes shortens s to at most n runes, marking a cut with "…".
func clipRunes(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
