package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// TestQueryAPIOnReadReplicas runs the command with MYSQL_READ_REPLICAS over a MariaDB primary
// and two GTID replicas: the query API reads the replicas while they are caught up, and a trace
// stored while both replicas stopped applying is still found by the next query (it waits, then
// reads the primary).
func TestQueryAPIOnReadReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a MariaDB primary and two replicas")
	}
	repl := mysqltest.StartReplication(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	setup, err := sql.Open("mysql", repl.Primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setup.ExecContext(ctx, "CREATE DATABASE zipkin"); err != nil {
		t.Fatal(err)
	}
	setup.Close()
	if err := repl.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	reps := []string{repl.Replicas[0].Addr(), repl.Replicas[1].Addr()}
	base, stop := runInProcess(t, envFunc("MYSQL_HOST", "127.0.0.1", "MYSQL_TCP_PORT", strconv.Itoa(repl.Primary.Port()),
		"MYSQL_USER", mysqltest.MariaDBUser, "MYSQL_PASS", mysqltest.MariaDBPassword, "MYSQL_DB", "zipkin",
		"MYSQL_READ_REPLICAS", strings.Join(reps, ",")), "-init-schema", "-storage", "mysql")
	defer stop()
	if err := repl.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	post := func(trace string) {
		t.Helper()
		body := fmt.Sprintf(`[{"traceId":"%s","id":"%s","name":"get /x","timestamp":%d,"duration":1000,"localEndpoint":{"serviceName":"replica-test"}}]`,
			trace, trace, time.Now().UnixMicro())
		resp, err := http.Post(base+"/api/v2/spans", "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST: %s", resp.Status)
		}
	}
	// found polls GET /api/v2/trace/{id} until the span is there (ingest is asynchronous:
	// 202 comes before the write commits).
	found := func(trace string) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			code, body := httpGet(t, base+"/api/v2/trace/"+trace)
			if code == http.StatusOK && strings.Contains(string(body), trace) {
				return time.Since(start)
			}
			if time.Since(start) > 60*time.Second {
				t.Fatalf("trace %s not found after 60 s: %d %s", trace, code, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	post("00000000000000a1")
	t.Logf("caught up: found after %v", found("00000000000000a1"))
	if n := replicaReads(t, base, reps); n == 0 {
		t.Errorf("no query read a replica")
	}
	for i := range 2 {
		if err := repl.PauseApply(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	post("00000000000000a2")
	t.Logf("replicas paused: found after %v", found("00000000000000a2"))
	if v := metric(t, base, `sqlpool_replica_primary_reads_total{reason="wait_timeout",router="zipkin"}`); v == 0 {
		t.Errorf("no query went to the primary after waiting")
	}
	for i := range 2 {
		if err := repl.ResumeApply(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
}

func replicaReads(t *testing.T, base string, reps []string) float64 {
	t.Helper()
	var n float64
	for _, r := range reps {
		n += metric(t, base, fmt.Sprintf(`sqlpool_replica_reads_total{replica=%q,router="zipkin"}`, r))
	}
	return n
}
