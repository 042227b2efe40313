package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestMeasureSQLite runs a tiny measurement of both implementations end to
// end on SQLite and checks the result line.
func TestMeasureSQLite(t *testing.T) {
	t.Parallel()
	for _, impl := range []string{"pool", "store"} {
		t.Run(impl, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			args := []string{"-impl", impl, "-backend", "sqlite", "-dir", t.TempDir(), "-workers", "2",
				"-jobs", "40", "-lat-jobs", "5", "-lat-rate", "500", "-timeout", "60s"}
			if err := run(args, &out); err != nil {
				t.Fatal(err)
			}
			var r result
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatalf("result line %q: %v", out.String(), err)
			}
			wantSystem := map[string]string{"pool": "maestro", "store": "maestro-store"}[impl]
			if r.System != wantSystem || r.Backend != "sqlite" || r.Workers != 2 || r.Jobs != 40 || r.Completed != 45 {
				t.Errorf("result %+v: expected system %s, sqlite, 2 workers, 40 jobs, 45 completed", r, wantSystem)
			}
			if r.JobsPerS <= 0 || r.LatP50US <= 0 || r.LatP99US < r.LatP50US || r.LatMaxUS < r.LatP99US {
				t.Errorf("implausible figures: %+v", r)
			}
		})
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-workers", "0"},
		{"-impl", "nope"},
		{"-backend", "mysql"},
		{"-backend", "postgres"}, // no -dsn
	} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("run(%q) succeeded, expected an error", args)
		}
	}
}
