package otlphttp_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/sqlpool/sqlpool/app/embedded"
	"github.com/sqlpool/sqlpool/app/zipkin/collector/grpccollector"
	"github.com/sqlpool/sqlpool/app/zipkin/collector/otlphttp"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pausable is a storage.Storage whose Accept can be held, to force the
// server's queue full.
type pausable struct {
	storage.Storage
	mu   sync.Mutex
	gate chan struct{} // nil: open; else Accept waits until it is closed
}

func (p *pausable) Accept(ctx context.Context, spans []model.Span) error {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return p.Storage.Accept(ctx, spans)
}

func (p *pausable) pause() {
	p.mu.Lock()
	if p.gate == nil {
		p.gate = make(chan struct{})
	}
	p.mu.Unlock()
}

func (p *pausable) resume() {
	p.mu.Lock()
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
	p.mu.Unlock()
}

// env is a span server on the embedded MySQL-protocol server with every
// collector: Zipkin's HTTP API, /v1/traces and SpanService/Report (h2c) on
// one HTTP port, OTLP/gRPC on another.
type env struct {
	srv      *server.Server
	store    *pausable
	reg      *prometheus.Registry
	base     string // http://host:port
	otlpGRPC string // host:port
}

func newEnv(t *testing.T, cfg server.Config) *env {
	t.Helper()
	dsn, writers := "", 1
	if os.Getenv("MYSQL_TEST_DSN") != "" {
		dsn, writers = freshDatabase(t), 2
	} else {
		d, stop, err := embedded.Start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stop() })
		dsn = d + "?parseTime=true"
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	// On the embedded server one connection, as the command: its memory
	// engine reverts a commit that another connection's statement
	// overlaps. On MariaDB one a writer and one for the queries.
	db.SetMaxOpenConns(1)
	if writers > 1 {
		db.SetMaxOpenConns(writers + 1)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := mysqlstore.CreateSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	st, err := mysqlstore.Open(ctx, db, mysqlstore.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{store: &pausable{Storage: st}, reg: prometheus.NewRegistry()}
	cfg.Storage = e.store
	cfg.Writers = writers
	cfg.Registerer = e.reg
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	e.srv, err = server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	trHTTP, err := e.srv.Transport("otlp-http")
	if err != nil {
		t.Fatal(err)
	}
	trGRPC, err := e.srv.Transport("otlp-grpc")
	if err != nil {
		t.Fatal(err)
	}
	trZipkin, err := e.srv.Transport("grpc")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", e.srv.Handler())
	mux.Handle(otlphttp.Path, otlphttp.Handler(trHTTP))
	zg := grpccollector.NewServer(nil, trZipkin)
	hs := httptest.NewUnstartedServer(grpccollector.Handler(zg, mux))
	hs.Config.Protocols = new(http.Protocols)
	hs.Config.Protocols.SetHTTP1(true)
	hs.Config.Protocols.SetUnencryptedHTTP2(true)
	hs.Start()
	e.base = hs.URL

	og := grpccollector.NewServer(trGRPC, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.otlpGRPC = ln.Addr().String()
	served := make(chan struct{})
	go func() { _ = og.Serve(ln); close(served) }()
	t.Cleanup(func() {
		e.store.resume()
		hs.Close()
		zg.Stop()
		og.Stop()
		<-served
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := e.srv.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	})
	return e
}

// counter reads a zipkin_collector_* counter or gauge of a transport.
func (e *env) counter(t testing.TB, name, transport string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelIs(m, "transport", transport) {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("metric %s{transport=%q} not found", name, transport)
	return 0
}

func labelIs(m *dto.Metric, k, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == k && l.GetValue() == v {
			return true
		}
	}
	return false
}

// waitDrained waits until the queue is empty.
func (e *env) waitDrained(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if n, _ := e.srv.QueueDepth(); n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the queue did not drain in 5 minutes")
		}
		<-tick.C
	}
}

// get returns the body of a GET, failing on a non-200.
func (e *env) get(t testing.TB, path string) []byte {
	t.Helper()
	resp, err := http.Get(e.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

// jsonSpan is the part of a span read back that the tests compare.
type jsonSpan struct {
	TraceID string `json:"traceId"`
	ID      string `json:"id"`
}

// spansByID reads traces by ID in chunks (traceMany) and returns how many
// times each traceId/spanId was returned.
func (e *env) spansByID(t testing.TB, traceIDs []string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for i := 0; i < len(traceIDs); i += 100 {
		j := min(i+100, len(traceIDs))
		var traces [][]jsonSpan
		body := e.get(t, "/api/v2/traceMany?traceIds="+strings.Join(traceIDs[i:j], ","))
		if err := json.Unmarshal(body, &traces); err != nil {
			t.Fatalf("traceMany: %v: %.200s", err, body)
		}
		for _, tr := range traces {
			for _, s := range tr {
				seen[s.TraceID+"/"+s.ID]++
			}
		}
	}
	return seen
}

// freshDatabase creates a database of its own on the MariaDB of
// MYSQL_TEST_DSN, dropped at the end of the test, and returns its DSN.
func freshDatabase(t *testing.T) string {
	t.Helper()
	base := mysqltest.DSN(t)
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatal(err)
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	name := "zo_" + hex.EncodeToString(rb[:])
	admin, err := sql.Open("mysql", base)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.ExecContext(ctx, "DROP DATABASE "+name)
		_ = admin.Close()
	})
	cfg.DBName = name
	cfg.ParseTime = true
	return cfg.FormatDSN()
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// rejected reads zipkin_collector_messages_rejected_total of a transport
// (0 when unreadable: for goroutines other than the test's).
func (e *env) rejected(transport string) float64 {
	mfs, _ := e.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == server.NameMessagesRejected {
			for _, m := range mf.GetMetric() {
				if labelIs(m, "transport", transport) {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
