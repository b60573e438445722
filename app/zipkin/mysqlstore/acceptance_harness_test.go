package mysqlstore_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/app/zipkin/storage/storagetest"
	"github.com/sqlpool/sqlpool/pool"
)

// harness is one server's database, pool and stores: what the acceptance
// checklist (zipkin/storage/storagetest) and the package's other tests run
// on.
type harness struct {
	srv        server
	db         *sql.DB // sqlpool's *sql.DB (p.OpenDB())
	zipkinOnly bool    // Zipkin's three tables only: no schema additions
}

var quietPoolLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// poolDB opens dsn through the sqlpool pool as the product does:
// pool.New over go-sql-driver's connector, then p.OpenDB().
func poolDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	p, err := pool.New(quietConnector(t, dsn), pool.Config{MaxConns: 4, MinIdleConns: -1, Logger: quietPoolLog})
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	db := p.OpenDB()
	t.Cleanup(func() {
		db.Close()
		if err := p.Close(); err != nil {
			t.Errorf("pool Close: %v", err)
		}
	})
	return db
}

// newHarness creates a fresh database with Zipkin's schema on srv.
func newHarness(t *testing.T, srv server) *harness {
	t.Helper()
	db := poolDB(t, freshDatabase(t, srv.dsn))
	if err := mysqlstore.CreateSchema(ctxT(t), db); err != nil {
		t.Fatalf("CreateSchema: %v", err)
	}
	return &harness{srv: srv, db: db}
}

// reset empties the tables (each checklist item starts on an empty store).
func (h *harness) reset(t *testing.T) {
	t.Helper()
	tables := []string{"zipkin_spans", "zipkin_annotations", "zipkin_dependencies", "zipkin_names", "zipkin_service_spans", "zipkin_tags",
		"zipkin_dependency_traces", "zipkin_dependency_queue", "zipkin_dependency_hours"}
	if h.zipkinOnly {
		tables = tables[:3]
	}
	for _, table := range tables {
		if _, err := h.db.ExecContext(ctxT(t), "DELETE FROM "+table); err != nil {
			t.Fatalf("DELETE FROM %s: %v", table, err)
		}
	}
}

// store opens a Store with opts on the harness' pool.
func (h *harness) store(t *testing.T, opts mysqlstore.Options) *mysqlstore.Store {
	t.Helper()
	opts.Logger = quietLogger
	s, err := mysqlstore.Open(ctxT(t), h.db, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// The checklist's fixtures and helpers, under the names the package's
// other tests use.
var (
	accept        = storagetest.Accept
	deps          = storagetest.Deps
	getTraces     = storagetest.GetTraces
	tracesString  = storagetest.TracesString
	clone         = storagetest.Clone
	epName        = storagetest.EpName
	randomTraceID = storagetest.RandomTraceID
	randomID      = storagetest.RandomID
	request       = storagetest.Request
	svc           = storagetest.Svc
	limit         = storagetest.Limit
	ctxBG         = context.Background()
)

// stdTrace is Zipkin's TestObjects.TRACE (storagetest.StdTrace).
type stdTrace struct{ storagetest.StdTrace }

func newStdTrace() stdTrace { return stdTrace{storagetest.NewStdTrace()} }

func (s stdTrace) spans() []model.Span { return s.Spans() }
