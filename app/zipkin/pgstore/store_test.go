package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/pgstore"
	"github.com/sqlpool/sqlpool/pool"
)

func count(t *testing.T, h *harness) int {
	t.Helper()
	var n int
	if err := h.db.QueryRowContext(ctxT(t), "SELECT count(*) FROM zipkin_spans").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReplayStoresOnce sends batches again, whole and overlapping: each
// fragment is stored once, by the staging path on pgx's COPY (a duplicate
// fails the COPY with 23505) and by ON CONFLICT DO NOTHING on lib/pq.
func TestReplayStoresOnce(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		h := newHarness(t, srv)
		s := h.store(t, pgstore.Options{})
		a, b := newStdTrace(), newStdTrace()
		accept(t, s, a.spans()...)
		accept(t, s, a.spans()...)                       // the same batch again
		accept(t, s, append(a.spans(), b.spans()...)...) // overlapping
		dup := append(b.spans(), b.spans()...)           // duplicates inside one batch
		accept(t, s, dup...)
		if n := count(t, h); n != 8 {
			t.Errorf("zipkin_spans holds %d rows, want 8 (two traces of four spans)", n)
		}
		assertTrace(t, s, a.id, a.spans())
		assertTrace(t, s, b.id, b.spans())
		st := s.Stats()
		if srv.name == "pgx" {
			if st.Copies != 1 || st.Staged != 3 || st.Inserts != 0 {
				t.Errorf("Stats = %+v, want 1 copy, 3 staged, 0 inserts", st)
			}
		} else if st.Inserts != 4 || st.Copies != 0 {
			t.Errorf("Stats = %+v, want 4 inserts", st)
		}
		// A later fragment of a span stored before is stored beside it and
		// merged when read.
		late := model.Span{TraceID: a.id, ID: a.root.ID, LocalEndpoint: frontend,
			Annotations: []model.Annotation{{Timestamp: a.start + 1, Value: "late"}}}
		accept(t, s, late)
		want := a.spans()
		want[0].Annotations = late.Annotations
		assertTrace(t, s, a.id, want)
		assertGetTraces(t, s, request(svc("frontend"), annotationQuery("late")), want)
	})
}

// TestCopyConnectionRelease: a batch written with COPY on the connection
// sql.Conn.Raw lends (BEGIN with the queue row, COPY, COMMIT, named to the
// pool through pgdialect.UnwrapFor) costs nothing at release: no reset, no
// new connection.
func TestCopyConnectionRelease(t *testing.T) {
	srv := freshSchema(t, server{name: "pgx", dsn: pgServerDSN(t)})
	p, err := pool.New(srv.connector(t), pool.Config{MaxConns: 1, MinIdleConns: -1, Logger: quietPoolLog})
	if err != nil {
		t.Fatal(err)
	}
	db := p.OpenDB()
	defer func() { db.Close(); p.Close() }()
	if err := pgstore.CreateSchema(ctxT(t), db); err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.Open(ctxT(t), db, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	accept(t, s, newStdTrace().spans()...) // names written once
	before := p.Stats()
	const batches = 5
	for range batches {
		accept(t, s, newStdTrace().spans()...)
	}
	after := p.Stats()
	plans := after.ReleasePlans - before.ReleasePlans
	t.Logf("%d COPY batches: %d release plans (session resets), %d connections opened", batches, plans, after.Created-before.Created)
	if after.Created != before.Created {
		t.Errorf("COPY batches opened %d connections: the lent connection was closed", after.Created-before.Created)
	}
	if plans != 0 {
		t.Errorf("COPY batches cost %d release plans, want 0", plans)
	}
	if s.Stats().Copies != batches+1 {
		t.Errorf("Stats = %+v, want %d copies", s.Stats(), batches+1)
	}
}

// TestDeleteBefore deletes the fragments older than a cutoff.
func TestDeleteBefore(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		h := newHarness(t, srv)
		s := h.store(t, pgstore.Options{})
		old, young := clientSpan(randomTraceID(), micros(today-3*day)), clientSpan(randomTraceID(), micros(today)+1000)
		accept(t, s, old, young)
		n, err := s.DeleteBefore(ctxT(t), time.UnixMilli(today-day))
		if err != nil || n != 1 {
			t.Fatalf("DeleteBefore = %d, %v; want 1 row", n, err)
		}
		assertTrace(t, s, old.TraceID, nil)
		assertTrace(t, s, young.TraceID, one(young))
		assertGetTraces(t, s, request(window(today+day, 10*day)), one(young))
	})
}

// TestOpenWithoutSchema answers ErrNoSchema, and Check fails, on a schema
// without the tables.
func TestOpenWithoutSchema(t *testing.T) {
	srv := freshSchema(t, server{name: "pgx", dsn: pgServerDSN(t)})
	db := poolDB(t, srv)
	if _, err := pgstore.Open(ctxT(t), db, pgstore.Options{}); !errors.Is(err, pgstore.ErrNoSchema) {
		t.Fatalf("Open = %v, want ErrNoSchema", err)
	}
	if err := pgstore.CreateSchema(ctxT(t), db); err != nil {
		t.Fatal(err)
	}
	if err := pgstore.CreateSchema(ctxT(t), db); err != nil {
		t.Fatalf("CreateSchema again: %v", err)
	}
	s, err := pgstore.Open(ctxT(t), db, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctxT(t)); err != nil {
		t.Fatalf("Check: %v", err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if err := s.Check(ctx); err == nil {
		t.Fatal("Check with a cancelled context = nil")
	}
}
