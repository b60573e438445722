package main

import (
	"context"
	"fmt"
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

	load := startPostLoad(t, p.url, 2, 0)
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
	p2 := startBinary(t, []string{"MYSQL_MAX_CONNECTIONS=4"}, args...)
	checkReplayed(t, admin, load, p2, fmt.Sprintf("SIGKILL while writing a backlog (%v spans queued)", queued))
	p2.stop(t)
}
