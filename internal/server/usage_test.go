package server_test

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/server"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/sqlite"
	"github.com/maestro-run/maestro/internal/store/sqlite/sqlitetest"
)

// TestUsageReport: GET /api/v1/usage adds up the jobs' cost and tokens of
// the window, by each grouping, lists the costliest tasks, leaves replay
// out unless asked, reports the month's cost against the configured
// budget, and refuses malformed parameters naming them.
func TestUsageReport(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 20, 12, 0, 0, 0, time.UTC)
	clock := now.Add(-72 * time.Hour) // the store's clock: the jobs' creation
	st := sqlitetest.Open(t, sqlite.Options{Now: func() time.Time { return clock }})
	e := newEnv(t, st, func(c *server.Config) {
		c.Now = func() time.Time { return now }
		c.BudgetUSDMonth = 50
	})
	task := func(title, piece string, events ...string) int64 {
		t.Helper()
		tk, job, err := st.CreateTask(t.Context(), store.NewTask{Title: title, Piece: piece})
		if err != nil {
			t.Fatal(err)
		}
		var evs []store.NewJobEvent
		for _, d := range events {
			evs = append(evs, store.NewJobEvent{Type: store.JobEventProtocol, Data: json.RawMessage(d)})
		}
		if _, err := st.AppendSystemJobEvents(t.Context(), job.ID, evs); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(24 * time.Hour)
		return tk.ID
	}
	const (
		claude = `{"type":"ready","provider":"anthropic","model":"claude-x","executor_type":"live"}`
		gpt    = `{"type":"ready","provider":"openai","model":"gpt-y","executor_type":"live"}`
		replay = `{"type":"ready","provider":"replay","model":"demo","executor_type":"replay"}`
	)
	end := func(in, out int, cost float64) string {
		b, _ := json.Marshal(map[string]any{"type": "response_end", "usage": map[string]any{"input_tokens": in, "output_tokens": out, "total_cost_usd": cost}})
		return string(b)
	}
	review := task("review it", "review", claude, end(100, 10, 1.5), end(50, 5, 0.5))
	fix := task("fix it", "fix", gpt, end(10, 1, 3))
	task("replayed", "review", replay, end(1, 1, 9))
	// A job that never ran (queued, or failed before an executor started:
	// no executor on its row, nothing spent) is no usage, with or without
	// replay: on a replay-only server a task whose job failed at once was
	// counted as a job while Include replay was off.
	clock = now.Add(-time.Hour)
	if _, _, err := st.CreateTask(t.Context(), store.NewTask{Title: "never ran", Piece: "fix"}); err != nil {
		t.Fatal(err)
	}

	var rep api.UsageReport
	e.must(http.StatusOK, "GET", "/api/v1/usage", nil, &rep)
	if rep.Totals != (api.UsageSum{Jobs: 2, CostUSD: 5, InputTokens: 160, OutputTokens: 16}) {
		t.Errorf("totals %+v", rep.Totals)
	}
	if rep.BudgetUSDMonth != 50 || math.Abs(rep.MonthCostUSD-5) > 1e-9 {
		t.Errorf("budget %v month cost %v, want 50 and 5", rep.BudgetUSDMonth, rep.MonthCostUSD)
	}
	if len(rep.TopTasks) != 2 || rep.TopTasks[0].TaskID != fix || rep.TopTasks[1].TaskID != review ||
		rep.TopTasks[1].Model != "anthropic/claude-x" || rep.TopTasks[1].Piece != "review" || rep.TopTasks[1].CostUSD != 2 {
		t.Errorf("top tasks %+v, want fix (3) then review (2)", rep.TopTasks)
	}
	for _, tc := range []struct {
		query string
		want  map[string]float64 // key → cost
	}{
		{"", map[string]float64{"2026-03-17": 2, "2026-03-18": 3}},
		{"group_by=model", map[string]float64{"anthropic/claude-x": 2, "openai/gpt-y": 3}},
		{"group_by=provider&include_replay=true", map[string]float64{"anthropic": 2, "openai": 3, "replay": 9}},
		{"group_by=piece&include_replay=true", map[string]float64{"review": 11, "fix": 3}},
		{"group_by=executor&include_replay=1", map[string]float64{"native": 5, "replay": 9}},
		{"from=2026-03-18&to=2026-03-19", map[string]float64{"2026-03-18": 3}},
		{"from=2026-03-18T00:00:00Z&include_replay=true", map[string]float64{"2026-03-18": 3, "2026-03-19": 9}},
	} {
		var r api.UsageReport
		e.must(http.StatusOK, "GET", "/api/v1/usage?"+tc.query, nil, &r)
		got := map[string]float64{}
		var sum float64
		for _, g := range r.Groups {
			got[g.Key] = g.CostUSD
			sum += g.CostUSD
		}
		if len(got) != len(tc.want) || math.Abs(sum-r.Totals.CostUSD) > 1e-9 {
			t.Errorf("?%s: groups %v (total %v), want %v", tc.query, got, r.Totals.CostUSD, tc.want)
			continue
		}
		for k, v := range tc.want {
			if math.Abs(got[k]-v) > 1e-9 {
				t.Errorf("?%s: group %q costs %v, want %v", tc.query, k, got[k], v)
			}
		}
	}
	for _, tc := range []struct{ query, field, says string }{
		{"group_by=week", "group_by", "day, model, provider, piece, executor"},
		{"from=yesterday", "from", "RFC 3339"},
		{"to=2026-13-01", "to", "RFC 3339"},
		{"from=2026-03-19&to=2026-03-18", "from", "ending after it starts"},
		{"from=2024-01-01", "from", "at most 400 days"},
		{"include_replay=maybe", "include_replay", "true or false"},
	} {
		ae := e.wantError(http.StatusBadRequest, "GET", "/api/v1/usage?"+tc.query, nil)
		if ae.Field != tc.field || !strings.Contains(ae.Error, tc.says) {
			t.Errorf("?%s: %+v, want field %s saying %q", tc.query, ae, tc.field, tc.says)
		}
	}
}

// TestPieceMissingTools: GET /api/v1/pieces names, per piece, the MCP
// tools and required servers this server lacks; a server the
// configuration defines is not missing.
func TestPieceMissingTools(t *testing.T) {
	t.Parallel()
	e := newEnv(t, sqliteStore(t), func(c *server.Config) { c.MCPServerNames = []string{"wiki"} })
	src := strings.Replace(strings.Replace(pieceYAML("mcp-user"), "allowed_tools: [Read]", "allowed_tools: [Read, mcp__tracker__search, mcp__wiki__read]", 1),
		"initial_movement:", "required_mcp: [tracker, wiki]\ninitial_movement:", 1)
	e.must(http.StatusCreated, "POST", "/api/v1/pieces", src, nil)
	var list api.PieceList
	e.must(http.StatusOK, "GET", "/api/v1/pieces", nil, &list)
	for _, p := range list.Pieces {
		switch p.Name {
		case "mcp-user":
			if want := []string{"mcp__tracker__search", "required_mcp tracker"}; !slices.Equal(p.MissingTools, want) {
				t.Errorf("mcp-user misses %q, want %q", p.MissingTools, want)
			}
		case "chat":
			if len(p.MissingTools) != 0 {
				t.Errorf("chat misses %q", p.MissingTools)
			}
		}
	}
}
