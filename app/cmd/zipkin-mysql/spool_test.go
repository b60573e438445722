package main

import (
	"database/sql"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// TestSpoolSurvivesSIGKILL: with -spool-dir, spans answered 202 survive a
// SIGKILL of the server while the database is down. Two clients post
// 5-span traces; MariaDB is stopped, so the spans pile up in the queue
// (and the spool); the server is killed with SIGKILL, MariaDB started,
// and the server started again on the same spool: every span answered
// 202 is in MariaDB, none twice, and the spool is empty.
func TestSpoolSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	m := mysqltest.StartMariaDB(t)
	spoolDir := t.TempDir()
	args := []string{"-listen", "127.0.0.1:0", "-dsn", m.DSN(), "-init-schema", "-writers", "2", "-spool-dir", spoolDir}
	p := startBinary(t, []string{"MYSQL_MAX_CONNECTIONS=4"}, args...)
	admin := openDB(t, m.DSN())

	load := startPostLoad(t, p.url, 2, 0)
	waitFor(t, 60*time.Second, "first spans stored", func() bool {
		return metric(t, p.url, `zipkin_collector_spans_stored_total{transport="http"}`) >= 200
	})
	m.Stop(t)
	waitFor(t, 30*time.Second, "spans queued while MariaDB is down", func() bool { return metric(t, p.url, queueSpans) >= 500 })
	queued := metric(t, p.url, queueSpans)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	m.Start(t)
	p2 := startBinary(t, []string{"MYSQL_MAX_CONNECTIONS=4"}, args...)
	checkReplayed(t, admin, load, p2, fmt.Sprintf("SIGKILL with %v spans queued (MariaDB down)", queued))
	p2.stop(t)
}

// checkReplayed points load at p2, the server started again on a killed one's spool, and
// checks, once 40 more traces were accepted and everything is written, that every trace
// answered 202 reads back whole and once (a request on disk whose 202 the kill cut off is
// stored too: at most one per client), no span row is stored twice, and the spool replayed
// something and is empty.
func checkReplayed(t *testing.T, admin *sql.DB, load *postLoad, p2 *proc, what string) {
	t.Helper()
	load.base.Store(&p2.url)
	load.progress(t, "the restart", 40)
	load.halt()
	waitDrained(t, p2.url, 2*time.Minute)
	waitFor(t, 30*time.Second, "the spool to be empty", func() bool {
		return metric(t, p2.url, `zipkin_spool_records{transport="http"}`) == 0
	})
	ids := load.acceptedIDs()
	n := countRows(t, admin, "SELECT COUNT(*) FROM zipkin_spans")
	distinct := countRows(t, admin, "SELECT COUNT(DISTINCT trace_id, id) FROM zipkin_spans")
	replayed := metric(t, p2.url, `zipkin_spool_replayed_total{transport="http"}`)
	t.Logf("%s: %d traces answered 202, %d spans stored (%d distinct); %v requests replayed", what, len(ids), n, distinct, replayed)
	missing, incomplete, twice := readBack(t, p2.url, ids)
	if missing+incomplete+twice > 0 || distinct != n || n > int64(5*(len(ids)+2)) {
		t.Errorf("of %d traces answered 202: %d missing, %d incomplete, %d returned twice; MariaDB has %d spans (%d distinct)",
			len(ids), missing, incomplete, twice, n, distinct)
	}
	if replayed == 0 {
		t.Error("nothing replayed: the test did not kill the server with spans queued")
	}
}
