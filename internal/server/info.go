package server

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/store"
)

// Info describes the serving process for GET /api/v1/server; empty
// fields are left out of the answer.
type Info struct {
	// Version is the binary's version (`maestro version`).
	Version string
	// Store is api.StoreSQLite or api.StorePostgres.
	Store string
	// StartedAt is when the process started serving.
	StartedAt time.Time
	// ExecutorDefault is what runs this process's jobs ("replay",
	// "native"); empty when it runs no workers.
	ExecutorDefault string
	// Agents are the agent CLIs this process's workers can run a task on
	// (installed); tasks naming another are refused, and with Worker set
	// and none installed every agent-cli task is. Empty when it runs no
	// workers (any agent is taken: workers elsewhere run the jobs).
	Agents []string
	// Worker is the name of this process's worker pool (empty: none) and
	// Host the machine it runs on.
	Worker, Host string
}

// workerSeenWithin is how recent the heartbeat of an idle maestro worker
// process must be for GET /api/v1/server to list it (a worker heartbeats
// every --lease/3).
const workerSeenWithin = 2 * time.Minute

// serverInfo answers GET /api/v1/server: the process's Info, the jobs by
// state, and the workers: this process's pool, every lease holder of a
// dispatching or running job, and every other worker process recorded in
// the store (idle).
func (s *Server) serverInfo(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	counts, err := s.st.CountJobs(ctx)
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	queue := make(map[store.State]int64, len(store.States()))
	for _, st := range store.States() {
		queue[st] = counts[st]
	}
	byID := map[string]*api.ServerWorker{}
	worker := func(id string) *api.ServerWorker {
		if wk, ok := byID[id]; ok {
			return wk
		}
		wk := &api.ServerWorker{ID: id, RunningJobs: []int64{}}
		byID[id] = wk
		return wk
	}
	info := s.cfg.Info
	if info.Worker != "" {
		worker(info.Worker).Host = info.Host
	}
	for after := int64(0); ; {
		jobs, err := s.st.ListJobs(ctx, store.JobFilter{States: []store.State{store.StateDispatching, store.StateRunning}, AfterID: after, Limit: store.MaxListLimit})
		if err != nil {
			s.storeError(w, r, err)
			return
		}
		for _, j := range jobs {
			if j.LeaseOwner == "" {
				continue
			}
			wk := worker(j.LeaseOwner)
			wk.RunningJobs = append(wk.RunningJobs, j.ID)
			for _, t := range []time.Time{j.AttemptedAt, j.HeartbeatAt} {
				if t.After(wk.LastSeen) {
					wk.LastSeen = t
				}
			}
		}
		if len(jobs) < store.MaxListLimit {
			break
		}
		after = jobs[len(jobs)-1].ID
	}
	// The worker processes on the database (PostgreSQL records them,
	// docs/scale-out.md "Process names") that hold no job are listed
	// idle, with their host and last heartbeat: the page of a team whose
	// maestro worker processes waited for jobs said "No workers seen".
	procs, err := s.st.ListProcesses(ctx, time.Now().Add(-workerSeenWithin))
	if err != nil {
		s.storeError(w, r, err)
		return
	}
	listed := func(name string) bool { // as a pool or by its slots (name/1, …)
		for id := range byID {
			if id == name || strings.HasPrefix(id, name+"/") {
				return true
			}
		}
		return false
	}
	for _, p := range procs {
		if p.Kind != store.ProcessWorker || listed(p.Name) {
			continue
		}
		wk := worker(p.Name)
		wk.Host, wk.LastSeen = p.Host, p.HeartbeatAt
	}
	workers := make([]api.ServerWorker, 0, len(byID))
	for _, wk := range byID {
		workers = append(workers, *wk)
	}
	slices.SortFunc(workers, func(a, b api.ServerWorker) int { return cmp.Compare(a.ID, b.ID) })
	writeJSON(w, http.StatusOK, api.ServerInfo{
		Version: info.Version, Store: info.Store, StartedAt: info.StartedAt.UTC(),
		ExecutorDefault: info.ExecutorDefault, Agents: info.Agents, Workers: workers, Queue: queue,
	})
}
