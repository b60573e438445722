package pgstore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/pool"
)

// TestMeasureSearch times the trace searches of the PostgreSQL query
// benchmark (app/bench/load's bulkQueries: the busier services svc-00 to
// svc-07, a 1 h window ending at the newest span, limit 10) on a database
// that benchmark loaded and left in place (PGSTORE_SEARCH_DSN: a URL of
// database zipkin_bench on a PostgreSQL of this machine), calling
// Store.GetTraces directly over one connection. For each search it reports
// the p50 and p99 latency and the CPU time per request of that
// connection's backend (from /proc) and of this process (decoding and
// merging the traces). PGSTORE_SEARCH_REPS sets the requests per search
// (default 100). It runs only when PGSTORE_SEARCH_DSN is set.
func TestMeasureSearch(t *testing.T) {
	dsn := os.Getenv("PGSTORE_SEARCH_DSN")
	if dsn == "" {
		t.Skip("set PGSTORE_SEARCH_DSN")
	}
	ctx := context.Background()
	reps := envN("PGSTORE_SEARCH_REPS", 100)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(stdlib.GetConnector(*cfg), pool.Config{MaxConns: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	db := p.OpenDB()
	defer func() { db.Close(); p.Close() }()
	s, err := Open(ctx, db, Options{AutocompleteKeys: []string{"http.method", "db.system"}})
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	var newest int64
	if err := db.QueryRowContext(ctx, "SELECT pg_backend_pid(), max(start_ts) FROM "+tableSpans).Scan(&pid, &newest); err != nil {
		t.Fatal(err)
	}
	backendCPU := func() time.Duration {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatalf("reading the backend's CPU time: %v", err)
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64)
		k, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(u+k) * 10 * time.Millisecond // USER_HZ 100
	}
	selfCPU := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	end := newest/1000 + 1
	svc := func(i int) string { return fmt.Sprintf("svc-%02d", i%8) }
	spanName := func(i int) string {
		verbs := [...]string{"get", "post", "put", "delete"}
		j := (i%8)*10 + i%10
		return fmt.Sprintf("%s /api/resource-%03d", verbs[j%4], j%200)
	}
	only := os.Getenv("PGSTORE_SEARCH_ONLY")
	for _, c := range []struct {
		name string
		q    func(i int, q *model.QueryRequest)
	}{
		{"traces by service (1 h, limit 10)", func(i int, q *model.QueryRequest) { q.ServiceName = svc(i) }},
		{"traces by service + span name", func(i int, q *model.QueryRequest) { q.ServiceName, q.SpanName = svc(i), spanName(i) }},
		{"traces by service + remote service (mysql)", func(i int, q *model.QueryRequest) { q.ServiceName, q.RemoteServiceName = svc(i), "mysql" }},
		{"traces by service + minDuration 100 ms", func(i int, q *model.QueryRequest) { q.ServiceName, q.MinDuration = svc(i), 100_000 }},
		{"traces by tag (service, http.method=POST)", func(i int, q *model.QueryRequest) {
			q.ServiceName, q.AnnotationQuery = svc(i), map[string]string{"http.method": "POST"}
		}},
		{"traces by tag (any service, db.statement=…)", func(i int, q *model.QueryRequest) {
			q.AnnotationQuery = map[string]string{"db.statement": fmt.Sprintf("SELECT * FROM t%d WHERE id = ?", i%500)}
		}},
		{"traces by error (any service)", func(i int, q *model.QueryRequest) { q.AnnotationQuery = map[string]string{"error": ""} }},
		{"traces by error (service)", func(i int, q *model.QueryRequest) {
			q.ServiceName, q.AnnotationQuery = svc(i), map[string]string{"error": ""}
		}},
		{"traces (window only)", func(int, *model.QueryRequest) {}},
	} {
		if only != "" && !strings.Contains(c.name, only) {
			continue
		}
		var d []time.Duration
		found := 0
		var sum uint64 // a fingerprint of the answers, to compare two versions
		b0, s0 := backendCPU(), selfCPU()
		for i := range reps {
			q := model.QueryRequest{EndTs: end, Lookback: 3_600_000, Limit: 10}
			c.q(i, &q)
			t1 := time.Now()
			traces, err := s.GetTraces(ctx, q)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			d = append(d, time.Since(t1))
			found += len(traces)
			for _, tr := range traces {
				sum = sum*31 + tr[0].TraceID.Low + uint64(len(tr))
			}
		}
		b1, s1 := backendCPU(), selfCPU()
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		ms := func(x time.Duration) float64 { return float64(x) / 1e6 }
		t.Logf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %x |", c.name, ms(d[len(d)/2]), ms(d[len(d)*99/100]),
			ms(b1-b0)/float64(reps), ms(s1-s0)/float64(reps), float64(found)/float64(reps), sum%0xffffff)
	}
}
