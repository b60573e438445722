package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/pgtest"
)

// The fault suite on PostgreSQL (STORAGE_TYPE=postgres): the built server
// under a steady stream of POSTs while every backend of its database is
// terminated every 500 ms and PostgreSQL is restarted (pgFaultsTest), and
// SIGKILLed with a backlog queued, with and without -spool-dir
// (TestPostgresSIGKILLBacklog). Every trace answered 202 is recorded by ID
// and read back through the API at the end: the accounting is exact.

// pgFaultDB is the database the server writes to; the test's own
// connections (the terminator, the checks) use database postgres, so that
// terminating every backend of pgFaultDB spares them.
const pgFaultDB = "zipkin"

// pgFaultServer starts a private PostgreSQL with database pgFaultDB and
// returns it, an admin handle on database postgres and the server's DSN.
func pgFaultServer(t *testing.T) (*pgtest.Server, *sql.DB, string) {
	t.Helper()
	pg := pgtest.Start(t)
	pg.Exec(t, "CREATE DATABASE "+pgFaultDB)
	admin := pg.Admin(t)
	admin.SetMaxOpenConns(2)
	u, err := url.Parse(pg.DSN())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + pgFaultDB
	return pg, admin, u.String()
}

// pgServerEnv is the environment of the built server on dsn.
func pgServerEnv(dsn string) []string {
	return []string{"STORAGE_TYPE=postgres", "POSTGRES_DSN=" + dsn, "POSTGRES_MAX_CONNECTIONS=4"}
}

// postLoad posts soakTrace traces from clients goroutines to the server at
// *base, recording each trace ID answered 202. Traces are numbered from
// first, so that loads of one test do not share IDs.
type postLoad struct {
	base      atomic.Pointer[string]
	seq       atomic.Int64
	posts     atomic.Int64 // POSTs sent
	rejected  atomic.Int64 // answered 503
	transport atomic.Int64 // no answer (server killed or restarting)
	mu        sync.Mutex
	accepted  []string // trace IDs answered 202, in order
	by        []string // the base URL that answered each of accepted
	stop      chan struct{}
	wg        sync.WaitGroup
}

func startPostLoad(t *testing.T, base string, clients int, first int64) *postLoad {
	l := &postLoad{stop: make(chan struct{})}
	l.base.Store(&base)
	l.seq.Store(first)
	for c := 0; c < clients; c++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
			for {
				select {
				case <-l.stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				tid, body := soakTrace(int(l.seq.Add(1)))
				l.posts.Add(1)
				base := *l.base.Load()
				resp, err := client.Post(base+"/api/v2/spans", "application/json", strings.NewReader(body))
				if err != nil {
					l.transport.Add(1)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusAccepted:
					l.mu.Lock()
					l.accepted = append(l.accepted, tid)
					l.by = append(l.by, base)
					l.mu.Unlock()
				case http.StatusServiceUnavailable:
					l.rejected.Add(1)
				default:
					t.Errorf("POST: HTTP %d %s", resp.StatusCode, b)
				}
			}
		}()
	}
	t.Cleanup(l.halt)
	return l
}

func (l *postLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

func (l *postLoad) nAccepted() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.accepted) }

func (l *postLoad) acceptedIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.accepted...)
}

// acceptedBy returns the trace IDs answered 202 by the server at base.
func (l *postLoad) acceptedBy(base string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for i, id := range l.accepted {
		if l.by[i] == base {
			out = append(out, id)
		}
	}
	return out
}

// progress waits until n more traces are answered 202.
func (l *postLoad) progress(t *testing.T, what string, n int) {
	t.Helper()
	target := l.nAccepted() + n
	waitFor(t, 2*time.Minute, fmt.Sprintf("%d more traces answered 202 after %s", n, what), func() bool { return l.nAccepted() >= target })
}

// readBack reads ids back through GET /api/v2/traceMany, 100 at a time, and
// returns how many are missing, incomplete (not 5 distinct spans) or
// returned more than once.
func readBack(t *testing.T, base string, ids []string) (missing, incomplete, twice int) {
	t.Helper()
	seen := map[string]int{}
	for i := 0; i < len(ids); i += 100 {
		chunk := ids[i:min(i+100, len(ids))]
		q := strings.Join(chunk, ",")
		if len(chunk) == 1 {
			q += ",1"
		}
		code, b := httpGet(t, base+"/api/v2/traceMany?traceIds="+q)
		if code != http.StatusOK {
			t.Fatalf("traceMany: HTTP %d %s", code, b)
		}
		var traces [][]struct {
			TraceID string `json:"traceId"`
			ID      string `json:"id"`
		}
		if err := json.Unmarshal(b, &traces); err != nil {
			t.Fatal(err)
		}
		for _, tr := range traces {
			spanIDs := map[string]bool{}
			for _, sp := range tr {
				spanIDs[sp.ID] = true
			}
			if len(tr) > 0 {
				seen[tr[0].TraceID]++
			}
			if len(tr) != 5 || len(spanIDs) != 5 {
				incomplete++
			}
		}
	}
	for _, id := range ids {
		switch seen[id] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	return missing, incomplete, twice
}

// storedTraceIDs returns the trace IDs (hex, as soakTrace writes them) in
// zipkin_spans of the database at dsn, with their span rows.
func storedTraceIDs(t *testing.T, dsn string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.QueryContext(ctx, "SELECT trace_id, count(*) FROM zipkin_spans GROUP BY trace_id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%016x", uint64(id))] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// terminator runs pg_terminate_backend on every backend of pgFaultDB every
// interval until stopped, counting rounds and backends ended.
type terminator struct {
	rounds, backends, failed atomic.Int64
	stop                     chan struct{}
	done                     chan struct{}
}

func startTerminator(admin *sql.DB, interval time.Duration) *terminator {
	k := &terminator{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(k.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-k.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			var n int64
			err := admin.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
				FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, pgFaultDB).Scan(&n)
			cancel()
			if err != nil {
				k.failed.Add(1) // PostgreSQL restarting
				continue
			}
			k.rounds.Add(1)
			k.backends.Add(n)
		}
	}()
	return k
}

func (k *terminator) halt() {
	select {
	case <-k.stop:
	default:
		close(k.stop)
	}
	<-k.done
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration such as 2m", name, v)
	}
	return d
}

func envCount(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count such as 3", name, v)
	}
	return n
}

// TestPostgresTerminateAndRestart runs the built server on PostgreSQL under
// 4 clients posting 5-span traces and, for PGFAULT_DURATION (8 s by
// default; minutes by hand), terminates every backend of its database every
// 500 ms (pg_terminate_backend), restarting PostgreSQL (fast shutdown, start
// on the same port and data directory) PGFAULT_RESTARTS times (1 by default)
// at even intervals within that window. Then every trace answered 202 is read
// back through the API: complete, exactly once; nothing is dropped.
func TestPostgresTerminateAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	window := envDuration(t, "PGFAULT_DURATION", 8*time.Second)
	restarts := envCount(t, "PGFAULT_RESTARTS", 1)
	pg, admin, dsn := pgFaultServer(t)
	srv := startBinary(t, pgServerEnv(dsn), "-listen", "127.0.0.1:0", "-init-schema", "-writers", "2", "-drain-timeout", "30s")
	load := startPostLoad(t, srv.url, 4, 0)
	load.progress(t, "the start", 50)

	const interval = 500 * time.Millisecond
	killer := startTerminator(admin, interval)
	defer killer.halt()
	t0 := time.Now()
	var downtimes []time.Duration
	for r := 1; r <= restarts; r++ {
		// Restart r at r/(restarts+1) of the window.
		time.Sleep(time.Until(t0.Add(window * time.Duration(r) / time.Duration(restarts+1))))
		t1 := time.Now()
		pg.Restart(t)
		downtimes = append(downtimes, time.Since(t1))
		load.progress(t, fmt.Sprintf("restart %d", r), 50)
	}
	time.Sleep(time.Until(t0.Add(window)))
	killer.halt()
	load.progress(t, "the terminations", 50)
	faultTime := time.Since(t0)
	load.halt()
	waitDrained(t, srv.url, 3*time.Minute)

	ids := load.acceptedIDs()
	missing, incomplete, twice := readBack(t, srv.url, ids)
	stored := storedTraceIDs(t, dsn)
	rows := 0
	for _, n := range stored {
		rows += n
	}
	dropped := metric(t, srv.url, `zipkin_collector_spans_dropped_total{transport="http"}`)
	failedBatches := metric(t, srv.url, `zipkin_collector_batches_failed_total{transport="http"}`)
	writeErrors := metric(t, srv.url, `zipkin_collector_writes_total{result="error",transport="http"}`)
	t.Logf("PostgreSQL faults for %v: %d termination rounds every %v ended %d backends (%d rounds refused while restarting); "+
		"%d restarts, downtime %v; %d POSTs of 5 spans: %d answered 202 (%d spans), %d answered 503, %d transport errors; "+
		"%d write attempts failed and were retried, %d batches given up, %v spans dropped; "+
		"read back: %d missing, %d incomplete, %d twice; zipkin_spans holds %d rows of %d traces",
		faultTime.Round(100*time.Millisecond), killer.rounds.Load(), interval, killer.backends.Load(), killer.failed.Load(),
		restarts, downtimes, load.posts.Load(), len(ids), 5*len(ids), load.rejected.Load(), load.transport.Load(),
		int(writeErrors), int(failedBatches), dropped, missing, incomplete, twice, rows, len(stored))
	if missing > 0 || incomplete > 0 || twice > 0 {
		t.Errorf("of %d traces answered 202: %d missing, %d incomplete, %d returned twice", len(ids), missing, incomplete, twice)
	}
	if rows != 5*len(stored) || len(stored) < len(ids) {
		t.Errorf("zipkin_spans holds %d rows of %d traces; want 5 per trace and at least the %d traces answered 202", rows, len(stored), len(ids))
	}
	if dropped != 0 || failedBatches != 0 {
		t.Errorf("%v spans dropped, %v batches given up; want none", dropped, failedBatches)
	}
	if killer.backends.Load() == 0 {
		t.Error("the terminations ended no backend: the test did not disturb the server")
	}
	srv.stop(t)
}

// TestPostgresSIGKILLBacklog stops PostgreSQL under load until at least 500
// spans are queued in the server, SIGKILLs the server, starts PostgreSQL and
// a new server (on the same spool directory, if any) and goes on posting.
// With -spool-dir every trace answered 202 is stored. Without it the kill
// loses exactly the traces answered 202 and not yet stored when it came
// (what the queue held): the test counts them against the rows PostgreSQL
// held before the new server started.
func TestPostgresSIGKILLBacklog(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	for _, spool := range []bool{true, false} {
		t.Run(map[bool]string{true: "spool", false: "no spool"}[spool], func(t *testing.T) {
			pg, _, dsn := pgFaultServer(t)
			args := []string{"-listen", "127.0.0.1:0", "-init-schema", "-writers", "2"}
			if spool {
				args = append(args, "-spool-dir", t.TempDir())
			}
			srv := startBinary(t, pgServerEnv(dsn), args...)
			load := startPostLoad(t, srv.url, 2, 0)
			waitFor(t, time.Minute, "first spans stored", func() bool {
				return metric(t, srv.url, `zipkin_collector_spans_stored_total{transport="http"}`) >= 200
			})
			pg.Stop(t)
			waitFor(t, time.Minute, "500 spans queued while PostgreSQL is down", func() bool { return metric(t, srv.url, queueSpans) >= 500 })
			queued := metric(t, srv.url, queueSpans)
			_ = srv.cmd.Process.Signal(syscall.SIGKILL)
			<-srv.exited
			pg.StartAgain(t)
			storedAtKill := storedTraceIDs(t, dsn)
			srv2 := startBinary(t, pgServerEnv(dsn), args...)
			load.base.Store(&srv2.url)
			load.progress(t, "the new server started", 50)
			load.halt()
			waitDrained(t, srv2.url, 2*time.Minute)
			if spool {
				waitFor(t, time.Minute, "the spool to be empty", func() bool {
					return metric(t, srv2.url, `zipkin_spool_records{transport="http"}`) == 0
				})
			}
			ids := load.acceptedIDs()
			beforeKill := load.acceptedBy(srv.url) // every trace answered 202 by the killed server
			missing, incomplete, twice := readBack(t, srv2.url, ids)
			stored := storedTraceIDs(t, dsn)
			unstoredAtKill := 0
			for _, id := range beforeKill {
				if storedAtKill[id] == 0 {
					unstoredAtKill++
				}
			}
			accepted := map[string]bool{}
			for _, id := range ids {
				accepted[id] = true
			}
			unacknowledged := 0 // stored, but the client saw no 202 (the kill cut the answer off)
			for id := range stored {
				if !accepted[id] {
					unacknowledged++
				}
			}
			var replayed float64
			if spool {
				replayed = metric(t, srv2.url, `zipkin_spool_replayed_total{transport="http"}`)
			}
			t.Logf("spool %v: SIGKILL with %v spans queued (PostgreSQL down); %d traces answered 202 before the kill, %d of them not yet stored; "+
				"in all %d POSTs, %d traces answered 202 (%d spans), %d answered 503, %d transport errors; %v requests replayed from the spool; "+
				"read back: %d traces missing (%d spans), %d incomplete, %d twice; %d traces stored without a 202",
				spool, queued, len(beforeKill), unstoredAtKill, load.posts.Load(), len(ids), 5*len(ids), load.rejected.Load(), load.transport.Load(),
				replayed, missing, 5*missing, incomplete, twice, unacknowledged)
			if incomplete > 0 || twice > 0 {
				t.Errorf("%d traces incomplete, %d returned twice", incomplete, twice)
			}
			if unstoredAtKill < 50 {
				t.Errorf("only %d traces answered 202 were unstored at the kill: the test did not kill the server mid-backlog", unstoredAtKill)
			}
			if spool {
				if missing > 0 {
					t.Errorf("with the spool, %d of %d traces answered 202 are missing", missing, len(ids))
				}
				if replayed == 0 {
					t.Error("nothing replayed from the spool")
				}
				if unacknowledged > 2 { // at most one POST per client cut off by the kill
					t.Errorf("%d traces stored without a 202, want at most one per client", unacknowledged)
				}
			} else if missing != unstoredAtKill {
				t.Errorf("without the spool %d traces answered 202 are missing; want exactly the %d unstored when the server was killed", missing, unstoredAtKill)
			}
			srv2.stop(t)
		})
	}
}
