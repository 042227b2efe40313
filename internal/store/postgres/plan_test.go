package postgres_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
)

// TestCompleteManyScalesLinearly: a CompleteMany (or StartMany) statement
// of n items handles O(n) rows in its plan. Joined to an unnest of the items, the
// planner (sure that few jobs are running: a new table, no statistics)
// chose a nested loop that ran the unnest again for every running job, n²
// rows (about 400 µs of server time per job at n = 200). Counted with
// EXPLAIN ANALYZE (rows × loops of every node), not timed.
func TestCompleteManyScalesLinearly(t *testing.T) {
	t.Parallel()
	const n = 200
	type testCase struct {
		name, query string
		start       bool // the statement starts jobs (claimed without starting them)
	}
	cases := []testCase{{"StartMany", postgres.StartManyQuery, true}}
	for i, q := range postgres.CompleteManyQueries {
		cases = append(cases, testCase{fmt.Sprint("CompleteMany", i), q, false})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openDSN(t, pg.Cluster(t).NewSchema(t), nil)
			ctx := t.Context()
			owners := make([]string, n)
			for i := range n {
				if _, err := s.Enqueue(ctx, store.NewJob{}); err != nil {
					t.Fatal(err)
				}
				owners[i] = fmt.Sprintf("w/%d", i+1)
			}
			jobs, err := s.Claim(ctx, store.ClaimParams{Workers: owners, LeaseFor: time.Minute, Start: !tc.start})
			if err != nil || len(jobs) != n {
				t.Fatalf("claimed %d jobs, %v; want %d", len(jobs), err, n)
			}
			ids, attempts := make([]int64, n), make([]int64, n)
			leases, results, datas := make([]string, n), make([]string, n), make([]string, n)
			for i, j := range jobs {
				ids[i], attempts[i], leases[i], results[i] = j.ID, int64(j.Attempt), j.LeaseOwner, "ok"
				state := store.StateSucceeded
				if tc.start {
					state = store.StateRunning
				}
				data, _ := json.Marshal(store.StatusEvent{State: state, Attempt: j.Attempt, Worker: j.LeaseOwner})
				datas[i] = string(data)
			}
			// The store's statements are prepared once per connection and
			// run with a generic plan (no parameter values) after five
			// runs: explain that plan.
			conn, err := postgres.SQLDB(s).Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, `PREPARE complete_many AS `+tc.query); err != nil {
				t.Fatal(err)
			}
			var plan string
			args := []string{arrayLiteral(ids), arrayLiteral(attempts), arrayLiteral(leases), arrayLiteral(results),
				arrayLiteral(datas), `now()`, "'" + postgres.Channel(s) + "'"}
			if tc.start { // ids, attempts, owners, datas, now, channel
				args = append(args[:3], args[4:]...)
			}
			err = conn.QueryRowContext(ctx, `EXPLAIN (ANALYZE, TIMING OFF, COSTS OFF, FORMAT JSON) EXECUTE complete_many(`+
				strings.Join(args, ", ")+`)`).Scan(&plan)
			if err != nil {
				t.Fatal(err)
			}
			var root []struct{ Plan planNode }
			if err := json.Unmarshal([]byte(plan), &root); err != nil || len(root) != 1 {
				t.Fatalf("EXPLAIN output %.200s: %v", plan, err)
			}
			want := store.StateSucceeded
			if tc.start {
				want = store.StateRunning
			}
			counts, err := s.CountJobs(ctx)
			if err != nil || counts[want] != n {
				t.Fatalf("job counts %v, %v; want %d %s", counts, err, n, want)
			}
			rows, worst := root[0].Plan.rows()
			t.Logf("%d rows for %d items (most: %s)", rows, n, worst)
			if rows > 20*n {
				t.Errorf("the statement handled %d rows for %d items; want at most %d (worst node: %s)", rows, n, 20*n, worst)
			}
		})
	}
}

// arrayLiteral is v as a quoted SQL array literal ('{"a","b"}').
func arrayLiteral[T any](v []T) string {
	var b strings.Builder
	b.WriteString("'{")
	for i, x := range v {
		if i > 0 {
			b.WriteByte(',')
		}
		e := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(fmt.Sprint(x))
		b.WriteString(`"` + strings.ReplaceAll(e, "'", "''") + `"`)
	}
	b.WriteString("}'")
	return b.String()
}

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	NodeType string     `json:"Node Type"`
	Rows     int        `json:"Actual Rows"`
	Loops    int        `json:"Actual Loops"`
	Plans    []planNode `json:"Plans"`
}

// rows sums rows × loops over the node and its children and names the
// node with the most.
func (p planNode) rows() (int, string) {
	total, most := p.Rows*p.Loops, p.Rows*p.Loops
	worst := fmt.Sprintf("%s, %d rows × %d loops", p.NodeType, p.Rows, p.Loops)
	for _, c := range p.Plans {
		r, w := c.rows()
		total += r
		if r > most {
			most, worst = r, w
		}
	}
	return total, worst
}
