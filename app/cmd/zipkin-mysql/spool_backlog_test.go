package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// TestSpoolSurvivesSIGKILLWhileWriting: with -spool-dir, spans answered
// 202 survive a SIGKILL of the server in the middle of writing a backlog
// to a database that is up. Two clients post 5-span traces while a
// session holds zipkin_spans locked (LOCK TABLES … WRITE), so the writers'
// transactions wait and the spans pile up; the lock is released, and once
// the writers have stored part of the backlog and are still writing, the
// server is killed with SIGKILL — with transactions in flight, their
// outcome decided by MariaDB alone. Started again on the same spool, the
// server stores every span answered 202, none twice.
func TestSpoolSurvivesSIGKILLWhileWriting(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	m := mysqltest.StartMariaDB(t)
	spoolDir := t.TempDir()
	args := []string{"-listen", "127.0.0.1:0", "-dsn", m.DSN(), "-init-schema", "-writers", "2", "-spool-dir", spoolDir}
	p := startBinary(t, []string{"MYSQL_MAX_CONNECTIONS=4"}, args...)
	admin := openDB(t, m.DSN())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var accepted atomic.Int64
	var acceptedMu sync.Mutex
	acceptedIDs := map[int64]bool{} // span IDs, unique across the test (spanBatch)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	base := atomic.Pointer[string]{}
	base.Store(&p.url)
	for c := 0; c < 2; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			client := &http.Client{Timeout: 10 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
				resp, err := client.Post(*base.Load()+"/api/v2/spans", "application/json", strings.NewReader(spanBatch(c, i, 5)))
				if err != nil {
					continue // the server is being killed or restarted
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					accepted.Add(5)
					acceptedMu.Lock()
					for k := 0; k < 5; k++ {
						acceptedIDs[int64(uint64(c+1)<<40|uint64(i)<<12|uint64(k+1))] = true
					}
					acceptedMu.Unlock()
				}
			}
		}(c)
	}
	waitFor(t, 60*time.Second, "first spans stored", func() bool {
		return metric(t, p.url, `zipkin_collector_spans_stored_total{transport="http"}`) >= 200
	})
	// Hold the span table: the writers' next transactions wait inside.
	lock, err := admin.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.ExecContext(ctx, "LOCK TABLES zipkin_spans WRITE"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "a backlog while zipkin_spans is locked", func() bool { return metric(t, p.url, queueSpans) >= 3000 })
	stored0 := metric(t, p.url, `zipkin_collector_spans_stored_total{transport="http"}`)
	if _, err := lock.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	lock.Close()
	// Kill while the backlog is being written: some of it stored, writes
	// still going.
	var queued float64
	waitFor(t, 60*time.Second, "the backlog being written", func() bool {
		queued = metric(t, p.url, queueSpans)
		return metric(t, p.url, `zipkin_collector_spans_stored_total{transport="http"}`) >= stored0+100 || queued < 500
	})
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	killedAt := accepted.Load()
	p2 := startBinary(t, []string{"MYSQL_MAX_CONNECTIONS=4"}, args...)
	base.Store(&p2.url)
	waitFor(t, 60*time.Second, "more spans accepted after the restart", func() bool { return accepted.Load() >= killedAt+200 })
	close(stop)
	wg.Wait()
	waitDrained(t, p2.url, 2*time.Minute)
	waitFor(t, 30*time.Second, "the spool to be empty", func() bool {
		return metric(t, p2.url, `zipkin_spool_records{transport="http"}`) == 0
	})

	n := countRows(t, admin, "SELECT COUNT(*) FROM zipkin_spans")
	distinct := countRows(t, admin, "SELECT COUNT(DISTINCT trace_id, id) FROM zipkin_spans")
	replayed := metric(t, p2.url, `zipkin_spool_replayed_total{transport="http"}`)
	t.Logf("SIGKILL while writing a backlog (%v spans queued): %d spans answered 202, %d stored (%d distinct); %v requests replayed",
		queued, accepted.Load(), n, distinct, replayed)
	rows, err := admin.QueryContext(ctx, "SELECT id FROM zipkin_spans")
	if err != nil {
		t.Fatal(err)
	}
	have := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		have[id] = true
	}
	rows.Close()
	missing := 0
	for id := range acceptedIDs {
		if !have[id] {
			missing++
		}
	}
	// Every span answered 202 is stored, once; a request on disk whose 202
	// the kill cut off is stored too (at most one per client).
	if missing > 0 || distinct != n || n > accepted.Load()+2*5 {
		t.Errorf("%d of %d spans answered 202 missing; MariaDB has %d spans (%d distinct)", missing, len(acceptedIDs), n, distinct)
	}
	if replayed == 0 {
		t.Error("nothing replayed: the test did not kill the server with spans queued")
	}
	p2.stop(t)
}
