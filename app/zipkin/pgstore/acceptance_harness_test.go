package pgstore_test

import (
	"database/sql"
	"io"
	"log/slog"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/pgstore"
	"github.com/sqlpool/sqlpool/app/zipkin/storage/storagetest"
	"github.com/sqlpool/sqlpool/pool"
)

// harness is one server's schema, pool and stores: what the acceptance
// checklist (zipkin/storage/storagetest) and the package's other tests run
// on.
type harness struct {
	srv server
	db  *sql.DB // sqlpool's *sql.DB (p.OpenDB())
}

var quietPoolLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// poolDB opens srv's database through the sqlpool pool as the product does:
// pool.New over the driver's connector (pgdialect's rules), then p.OpenDB().
func poolDB(t testing.TB, srv server) *sql.DB {
	t.Helper()
	p, err := pool.New(srv.connector(t), pool.Config{MaxConns: 4, MinIdleConns: -1, Logger: quietPoolLog})
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

// newHarness creates a fresh schema with the store's tables on srv.
func newHarness(t *testing.T, srv server) *harness {
	t.Helper()
	srv = freshSchema(t, srv)
	db := poolDB(t, srv)
	if err := pgstore.CreateSchema(ctxT(t), db); err != nil {
		t.Fatalf("CreateSchema: %v", err)
	}
	return &harness{srv: srv, db: db}
}

// reset empties the tables (each checklist item starts on an empty store).
func (h *harness) reset(t *testing.T) {
	t.Helper()
	if _, err := h.db.ExecContext(ctxT(t), "TRUNCATE zipkin_spans, zipkin_names, zipkin_dependency_queue, zipkin_dependency_traces, zipkin_dependency_hours"); err != nil {
		t.Fatalf("TRUNCATE: %v", err)
	}
}

// store opens a Store with opts on the harness' pool.
func (h *harness) store(t *testing.T, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(ctxT(t), h.db, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// The checklist's fixtures and helpers, under the names the package's
// other tests use.
var (
	today           = storagetest.Today
	frontend        = storagetest.Frontend
	randomTraceID   = storagetest.RandomTraceID
	micros          = storagetest.Micros
	clientSpan      = storagetest.ClientSpan
	request         = storagetest.Request
	svc             = storagetest.Svc
	annotationQuery = storagetest.AnnotationQuery
	window          = storagetest.Window
	limit           = storagetest.Limit
	accept          = storagetest.Accept
	assertTrace     = storagetest.AssertTrace
	assertGetTraces = storagetest.AssertGetTraces
)

const day = storagetest.Day

func one(s model.Span) []model.Span { return []model.Span{s} }

// stdTrace is Zipkin's TestObjects.TRACE (storagetest.StdTrace).
type stdTrace struct {
	storagetest.StdTrace
	id    model.TraceID
	root  model.Span
	start int64
}

func newStdTrace() stdTrace {
	s := storagetest.NewStdTrace()
	return stdTrace{StdTrace: s, id: s.ID, root: s.Root, start: s.Start}
}

func (s stdTrace) spans() []model.Span { return s.Spans() }

// assertLinks and link are storagetest's, under the names deps_test.go uses.
var (
	assertLinks = storagetest.AssertLinks
	link        = storagetest.Link
	deps        = storagetest.Deps
)
