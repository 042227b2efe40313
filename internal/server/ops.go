package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/maestro-run/maestro/internal/api"
	"github.com/maestro-run/maestro/internal/blobstore"
	"github.com/maestro-run/maestro/internal/store"
)

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	servePage(s, w, r, "before", 100, func(ctx context.Context, before int64, limit int) ([]store.AuditEntry, error) {
		return s.st.ListAudit(ctx, store.AuditFilter{Target: r.URL.Query().Get("target"), BeforeID: before, Limit: limit})
	}, func(entries []store.AuditEntry, limit int) api.AuditList {
		return api.AuditList{Entries: nonNil(entries), NextBefore: nextCursor(entries, limit, func(e store.AuditEntry) int64 { return e.ID })}
	})
}

// healthz answers while the process serves HTTP.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: api.HealthOK})
}

// readyTimeout bounds the checks of /readyz, together.
const readyTimeout = 2 * time.Second

// readyz answers 200 when the store answers a query within 2 s and, with
// an artifact store (Config.Artifacts), that store answers a lookup within
// the same 2 s: a serve whose artifact store is down can neither take
// uploads nor serve deliverables, nor its workers run a job. Otherwise it
// answers 503, its error naming what is not ready (the details are in the
// server's log).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	var artifactsErr error
	var wg sync.WaitGroup
	if a := s.cfg.Artifacts; a != nil {
		// A lookup of a key that does not exist: a round trip to the
		// store that needs its credentials, and nothing more.
		wg.Go(func() {
			if _, err := a.Stat(ctx, "readyz"); err != nil && !blobstore.IsNotExist(err) {
				artifactsErr = err
			}
		})
	}
	// A lookup by primary key of a job that cannot exist: a round trip to
	// the database and nothing more.
	_, err := s.st.GetJob(ctx, 0)
	wg.Wait()
	var why []string
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("readiness check failed: the store", "err", err)
		why = append(why, "the store does not answer")
	}
	if artifactsErr != nil {
		s.log.Warn("readiness check failed: the artifact store", "location", s.cfg.Artifacts.Location(), "err", artifactsErr)
		if blobstore.IsUnavailable(artifactsErr) {
			why = append(why, "the artifact store does not answer")
		} else {
			why = append(why, "the artifact store refuses the check (see the server log)")
		}
	}
	if len(why) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, api.Health{Status: api.HealthUnavailable, Error: strings.Join(why, "; ")})
		return
	}
	writeJSON(w, http.StatusOK, api.Health{Status: api.HealthReady})
}

// metrics writes Prometheus text: whether the store answers, jobs by
// state, then the queue's metrics. A store that does not answer within
// 2 s (a database outage) leaves out the jobs by state, not the rest: the
// queue's counters (claim errors among them) matter most then.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	counts, err := s.st.CountJobs(ctx)
	var b bytes.Buffer
	b.WriteString("# HELP maestro_store_up Whether the store answered this scrape's query (1) or not (0).\n# TYPE maestro_store_up gauge\n")
	if err != nil {
		s.log.Warn("metrics: the store does not answer; jobs by state left out", "err", err)
		b.WriteString("maestro_store_up 0\n")
	} else {
		b.WriteString("maestro_store_up 1\n")
		b.WriteString("# HELP maestro_jobs Jobs in the store by state.\n# TYPE maestro_jobs gauge\n")
		for _, st := range store.States() {
			fmt.Fprintf(&b, "maestro_jobs{state=%q} %d\n", st, counts[st])
		}
	}
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.WritePrometheus(&b)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(b.Bytes())
}
