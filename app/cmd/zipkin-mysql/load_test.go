package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// spanBatch is a JSON v2 list of n spans, each of its own trace, with IDs
// derived from (stream, seq) so that every span of a test is distinct.
func spanBatch(stream, seq, n int) string {
	var b strings.Builder
	b.WriteByte('[')
	now := time.Now().UnixMicro()
	for k := 0; k < n; k++ {
		if k > 0 {
			b.WriteByte(',')
		}
		id := uint64(stream+1)<<40 | uint64(seq)<<12 | uint64(k+1)
		fmt.Fprintf(&b, `{"traceId":"%016x","id":"%016x","name":"op","kind":"SERVER","timestamp":%d,"duration":150,`+
			`"localEndpoint":{"serviceName":"load","ipv4":"10.0.0.1"},"annotations":[{"timestamp":%d,"value":"ws"}],"tags":{"k":"v"}}`,
			id, id, now, now+1)
	}
	b.WriteByte(']')
	return b.String()
}

// TestOverload: a database slowed by the fault proxy and a flood of POSTs
// from 16 clients. Every answer is 202 or 503; the queue stays within its
// bound and the server's RSS stays bounded; afterwards every span answered
// 202 is in MariaDB, counted there, once.
func TestOverload(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	dsn := freshDatabase(t)
	cfg, _ := mysql.ParseDSN(dsn)
	proxy := mysqltest.NewProxy(t, cfg.Addr)
	const queueBound = 2000
	p := startBinary(t, []string{"MYSQL_MAX_CONNECTIONS=4"}, "-listen", "127.0.0.1:0", "-dsn", proxy.DSN(dsn),
		"-init-schema", "-writers", "2", "-queue-spans", fmt.Sprint(queueBound))
	proxy.SetLatency(15 * time.Millisecond) // ≥ 30 ms per round trip

	// 16 clients post for 4 s each (at most 2000 POSTs each).
	const clients, posts, perPost, floodFor = 16, 2000, 50, 4 * time.Second
	var accepted, rejected atomic.Int64
	var other sync.Map
	stop := make(chan struct{})
	var maxQueue, maxRSS float64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			maxQueue = max(maxQueue, metric(t, p.url, queueSpans))
			maxRSS = max(maxRSS, metric(t, p.url, "process_resident_memory_bytes"))
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			client := &http.Client{Timeout: 30 * time.Second}
			end := time.Now().Add(floodFor)
			for i := 0; i < posts && time.Now().Before(end); i++ {
				resp, err := client.Post(p.url+"/api/v2/spans", "application/json", strings.NewReader(spanBatch(c, i, perPost)))
				if err != nil {
					other.Store(err.Error(), true)
					continue
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusAccepted:
					accepted.Add(perPost)
				case http.StatusServiceUnavailable:
					rejected.Add(perPost)
				default:
					other.Store(resp.Status, true)
				}
			}
		}(c)
	}
	wg.Wait()
	flood := time.Since(start)
	storedDuringFlood := int64(metric(t, p.url, `zipkin_collector_spans_stored_total{transport="http"}`))
	close(stop)
	<-sampled
	other.Range(func(k, _ any) bool { t.Errorf("answer other than 202/503: %v", k); return true })

	proxy.SetLatency(0)
	waitDrained(t, p.url, 3*time.Minute)
	db := openDB(t, dsn)
	stored := countRows(t, db, "SELECT COUNT(*) FROM zipkin_spans")
	distinct := countRows(t, db, "SELECT COUNT(DISTINCT trace_id, id) FROM zipkin_spans")
	t.Logf("overload: %d clients posting %d spans per POST for %v: %d spans answered 202, %d answered 503; "+
		"max queue %v spans (bound %d); max RSS %.1f MiB; stored %d (%d during the flood)",
		clients, perPost, flood.Round(time.Millisecond), accepted.Load(), rejected.Load(), maxQueue, queueBound,
		maxRSS/(1<<20), stored, storedDuringFlood)
	if stored != accepted.Load() || distinct != stored {
		t.Fatalf("MariaDB has %d spans (%d distinct); %d were answered 202", stored, distinct, accepted.Load())
	}
	if rejected.Load() == 0 {
		t.Errorf("no 503 under overload: the flood did not fill the queue (raise the latency)")
	}
	if maxQueue > queueBound {
		t.Errorf("queue reached %v spans, above its bound %d", maxQueue, queueBound)
	}
	if maxRSS > 512<<20 {
		t.Errorf("RSS reached %.0f MiB", maxRSS/(1<<20))
	}
	if f := metric(t, p.url, `zipkin_collector_batches_failed_total{transport="http"}`); f != 0 {
		t.Errorf("%v batches failed", f)
	}
	p.stop(t)
}

// TestKillAndRestart: during a steady stream of POSTs every server thread of
// the span server's connections is KILLed, and later MariaDB restarts.
// Every span answered 202 is in the database afterwards, none twice.
func TestKillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	m := mysqltest.StartMariaDB(t)
	p := startBinary(t, []string{"MYSQL_MAX_CONNECTIONS=4"}, "-listen", "127.0.0.1:0", "-dsn", m.DSN(), "-init-schema", "-writers", "2")
	admin := openDB(t, m.DSN())

	var accepted, rejected, errs atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := 0; c < 2; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			client := &http.Client{Timeout: 30 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				resp, err := client.Post(p.url+"/api/v2/spans", "application/json", strings.NewReader(spanBatch(c, i, 20)))
				if err != nil {
					errs.Add(1)
					continue
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case 202:
					accepted.Add(20)
				case 503:
					rejected.Add(20)
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}(c)
	}
	waitStored := func(n float64) {
		waitFor(t, 60*time.Second, fmt.Sprintf("%v spans stored", n), func() bool {
			return metric(t, p.url, `zipkin_collector_spans_stored_total{transport="http"}`) >= n
		})
	}
	waitStored(500)

	// KILL every connection but our own.
	rows, err := admin.Query("SELECT id FROM information_schema.processlist WHERE id <> CONNECTION_ID() AND command NOT IN ('Daemon', 'Binlog Dump')")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		_, _ = admin.Exec(fmt.Sprintf("KILL %d", id)) // a thread may already be gone
	}
	killedAt := metric(t, p.url, `zipkin_collector_spans_stored_total{transport="http"}`)
	waitStored(killedAt + 500)

	m.Restart(t)
	restartedAt := metric(t, p.url, `zipkin_collector_spans_stored_total{transport="http"}`)
	waitStored(restartedAt + 500)
	close(stop)
	wg.Wait()

	waitDrained(t, p.url, 3*time.Minute)
	stored := countRows(t, admin, "SELECT COUNT(*) FROM zipkin_spans")
	distinct := countRows(t, admin, "SELECT COUNT(DISTINCT trace_id, id) FROM zipkin_spans")
	annotations := countRows(t, admin, "SELECT COUNT(*) FROM zipkin_annotations WHERE a_key = 'ws'")
	t.Logf("kill+restart: killed %d threads; %d spans answered 202, %d answered 503, %d transport errors; stored %d",
		len(ids), accepted.Load(), rejected.Load(), errs.Load(), stored)
	if stored != accepted.Load() || distinct != stored || annotations != stored {
		t.Fatalf("MariaDB has %d spans (%d distinct, %d 'ws' annotations); %d were answered 202",
			stored, distinct, annotations, accepted.Load())
	}
	if f := metric(t, p.url, `zipkin_collector_batches_failed_total{transport="http"}`); f != 0 {
		t.Errorf("%v batches failed", f)
	}
	p.stop(t)
}
