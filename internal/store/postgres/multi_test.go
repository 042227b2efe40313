package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/maestro-run/maestro/internal/pgtest"
	"github.com/maestro-run/maestro/internal/store"
	"github.com/maestro-run/maestro/internal/store/postgres"
	"github.com/maestro-run/maestro/internal/store/storetest"
)

// TestTwoStoresClaimExactlyOnce is two processes' worth of stores (separate
// pools) on one database, 4 claimers each, 2,000 jobs.
func TestTwoStoresClaimExactlyOnce(t *testing.T) {
	t.Parallel()
	const jobs = 2000
	a, b, _ := twoStoresWithJobs(t, jobs)
	ctx := t.Context()
	var (
		mu      sync.Mutex
		claimed = map[int64]string{}
	)
	// Workers alternate between the two stores.
	stores := func(i int) store.Jobs {
		if i%2 == 1 {
			return b
		}
		return a
	}
	err := storetest.ClaimAll(ctx, 8, 5, stores, func(name string, j store.Job, _ time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := claimed[j.ID]; dup {
			return fmt.Errorf("job %d claimed by %s and %s", j.ID, prev, name)
		}
		claimed[j.ID] = name
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(claimed) != jobs {
		t.Fatalf("claimed %d jobs, want %d", len(claimed), jobs)
	}
	counts, err := b.CountJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[store.StateSucceeded] != jobs || len(counts) != 1 {
		t.Fatalf("counts = %v, want %d succeeded", counts, jobs)
	}
}

// TestWakeupsCrossStores: a job queued through one store wakes a claimer
// subscribed through another (LISTEN/NOTIFY), and schemas do not cross-talk.
func TestWakeupsCrossStores(t *testing.T) {
	t.Parallel()
	c := pg.Cluster(t)
	dsn := c.NewSchema(t)
	a, b := openDSN(t, dsn, nil), openDSN(t, dsn, nil)
	other := openDSN(t, c.NewSchema(t), nil)
	ctx := t.Context()
	subB, err := b.Subscribe(ctx, store.TopicJobs)
	if err != nil {
		t.Fatal(err)
	}
	defer subB.Close()
	subOther, err := other.Subscribe(ctx, store.TopicJobs)
	if err != nil {
		t.Fatal(err)
	}
	defer subOther.Close()
	if _, err := a.Enqueue(ctx, store.NewJob{}); err != nil {
		t.Fatal(err)
	}
	if n := storetest.Recv(t, subB); n.Topic != store.TopicJobs {
		t.Fatalf("got %+v", n)
	}
	if err := a.Notify(ctx, store.TopicJobs, "direct"); err != nil {
		t.Fatal(err)
	}
	if n := storetest.Recv(t, subB); n.Payload != "direct" {
		t.Fatalf("got %+v, want the direct notification", n)
	}
	// The other schema's store saw neither: its first notification is its
	// own.
	if err := other.Notify(ctx, store.TopicJobs, "mine"); err != nil {
		t.Fatal(err)
	}
	if n := storetest.Recv(t, subOther); n.Payload != "mine" {
		t.Fatalf("another schema's store received %+v", n)
	}
	_, err = a.Subscribe(ctx, "x\ny")
	if err == nil {
		t.Fatal("Subscribe with a newline in the topic succeeded")
	}
	if err := a.Notify(ctx, "big", string(make([]byte, 8000))); err == nil {
		t.Fatal("Notify over the NOTIFY size limit succeeded")
	}
}

// TestListenerReconnects: when the LISTEN connection is killed, subscribers
// get an empty "re-read" notification once it is back, and later
// notifications arrive again.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	c := pg.Cluster(t)
	dsn := c.NewSchema(t)
	s := openDSN(t, dsn, nil)
	ctx := t.Context()
	sub, err := s.Subscribe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	admin := pgtest.OpenDB(t, c.DSN("postgres", nil))
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// Only this store's listener: other tests share the cluster.
	listen := `LISTEN "maestro_` + u.Query().Get("search_path") + `"`
	kill := func() int {
		var n int
		err := admin.QueryRowContext(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND query = $1::text`, listen).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := kill(); n != 1 {
		t.Fatalf("killed %d listener connections, want 1", n)
	}
	if n := storetest.Recv(t, sub); n != (store.Notification{Topic: "t"}) {
		t.Fatalf("after reconnecting got %+v, want an empty re-read notification", n)
	}
	if err := s.Notify(ctx, "t", "after"); err != nil {
		t.Fatal(err)
	}
	if n := storetest.Recv(t, sub); n.Payload != "after" {
		t.Fatalf("got %+v, want the notification sent after reconnecting", n)
	}
}

// TestOpenErrors: a bad DSN and an unreachable server fail with clear errors.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := postgres.Open(ctx, "postgres://%zz", postgres.Options{}); err == nil {
		t.Fatal("Open with a malformed DSN succeeded")
	}
	if _, err := postgres.Open(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", postgres.Options{}); err == nil {
		t.Fatal("Open of an unreachable server succeeded")
	}
}

// TestOpenSaysWhatToDo: a user the server refuses, a missing database and
// a server that does not answer are each said in one line with what to
// check, without pgx's report of every attempt (TLS first, then without:
// "tls error: server refused TLS connection" led every message).
func TestOpenSaysWhatToDo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	addr := pg.Cluster(t).TCPAddr()
	for dsn, want := range map[string]string{
		"postgres://nobody:pw@" + addr + "/postgres?connect_timeout=5":  `PostgreSQL at ` + addr + ` refused user "nobody": role "nobody" does not exist (SQLSTATE 28000): check the user name and password in the URL`,
		"postgres://postgres@" + addr + "/no_such_db?connect_timeout=5": `PostgreSQL at ` + addr + `: database "no_such_db" does not exist (SQLSTATE 3D000): create it (createdb -O postgres no_such_db) or name an existing database in the URL`,
		"postgres://postgres@127.0.0.1:1/postgres?connect_timeout=5":    `PostgreSQL at 127.0.0.1:1 cannot be reached (connect: connection refused): is the server running, and are the URL's host and port right?`,
		// docs/store.md's search_path=myschema, before the schema exists.
		"postgres://postgres@" + addr + "/postgres?connect_timeout=5&search_path=no_such_schema": `no schema of the search_path "no_such_schema" exists in database "postgres": create it (CREATE SCHEMA …) or name an existing one in the URL's search_path`,
	} {
		_, err := postgres.Open(ctx, dsn, postgres.Options{})
		if err == nil || err.Error() != "open PostgreSQL store: "+want {
			t.Errorf("Open(%s): %v\nwant: open PostgreSQL store: %s", dsn, err, want)
		}
	}
}

// twoStoresWithJobs opens two stores (separate pools and listeners) on one
// new schema and enqueues n jobs through the first; it returns their ids.
func twoStoresWithJobs(t *testing.T, n int) (a, b *postgres.Store, ids []int64) {
	t.Helper()
	dsn := pg.Cluster(t).NewSchema(t)
	a, b = openDSN(t, dsn, nil), openDSN(t, dsn, nil)
	for range n {
		j, err := a.Enqueue(t.Context(), store.NewJob{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	return a, b, ids
}
