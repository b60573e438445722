package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// EnvGaleraLong selects the long form of TestGaleraNodeKilledDuringIngest:
// the ingest rate is half of the saturation measured first on the same
// cluster, and ingest runs longer on either side of the kill.
const EnvGaleraLong = "SQLPOOL_GALERA_LONG"

// TestGaleraNodeKilledDuringIngest runs the command on the 3-node Galera
// test bed (MYSQL_HOST listing the nodes, round-robin, the Galera
// readiness check) while spans are POSTed at a steady rate and queries run
// every 50 ms; one node is SIGKILLed and restarted (it rejoins by state
// transfer). Once the queue is drained and every node has applied every
// write (Galera.WaitApplied: the server's reads are not causal), every span
// answered 202 must be read back through the HTTP API (0 lost), the
// dependency links must count every trace once
// (the aggregator's per-trace rows conflict across nodes at
// certification, and each conflict is retried), and no query may fail
// except within 2 s of the kill (their latency is logged). The short form (CI) runs a
// fixed 300 spans/s; SQLPOOL_GALERA_LONG=1 measures saturation first and
// runs at half of it. Without Galera it skips (fails with
// SQLPOOL_REQUIRE_GALERA=1). Figures go to the test log; docs/design/zipkin.md
// quotes them.
func TestGaleraNodeKilledDuringIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a 3-node Galera cluster and kills a node")
	}
	g := mysqltest.StartGalera(t)
	long := os.Getenv(EnvGaleraLong) == "1"
	setup, err := sql.Open("mysql", g.DSN(1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := setup.ExecContext(ctx, "CREATE DATABASE zipkin"); err != nil {
		t.Fatal(err)
	}
	setup.Close()
	hosts := []string{g.Addr(1), g.Addr(2), g.Addr(3)}
	base, stop := runInProcess(t, envFunc("MYSQL_HOST", strings.Join(hosts, ","), "MYSQL_USER", mysqltest.MariaDBUser,
		"MYSQL_PASS", mysqltest.MariaDBPassword, "MYSQL_DB", "zipkin", "MYSQL_GALERA", "true",
		"MYSQL_HOST_STRATEGY", "round-robin", "MYSQL_MAX_CONNECTIONS", "12"), "-init-schema", "-storage", "mysql", "-writers", "4")
	defer stop()

	client := &http.Client{Timeout: 30 * time.Second}
	ing := &galeraIngest{t: t, base: base, client: client}
	rate := 300.0 // spans/s
	before, after := 6*time.Second, 6*time.Second
	earlier, earlierMaybe := 0, 0 // traces stored before the measured run (saturation)
	if long {
		sat := ing.saturation(8 * time.Second)
		a, _ := ing.result()
		earlier, earlierMaybe = len(a), ing.unsure()
		rate = sat / 2
		before, after = 20*time.Second, 20*time.Second
		t.Logf("saturation %.0f spans/s (accepted and stored, 4 posters, 30-span batches); running at %.0f spans/s", sat, rate)
	}
	ing.reset()

	qctx, qstop := context.WithCancel(ctx)
	var qwg sync.WaitGroup
	qs := &galeraQueries{base: base, client: client}
	qwg.Add(1)
	go func() { defer qwg.Done(); qs.run(qctx) }()

	ictx, istop := context.WithCancel(ctx)
	var iwg sync.WaitGroup
	iwg.Add(1)
	go func() { defer iwg.Done(); ing.paced(ictx, rate) }()

	time.Sleep(before) // ingest and queries on three nodes
	killAt := time.Now()
	g.Kill(2)
	t.Logf("node 2 SIGKILLed at +%s", killAt.Sub(qs.start()).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	restartAt := time.Now()
	g.Start(2) // returns once it is Synced again
	t.Logf("node 2 restarted and Synced in %s", time.Since(restartAt).Round(time.Millisecond))
	time.Sleep(after)
	istop()
	iwg.Wait()
	waitDrained(t, base, 2*time.Minute)
	qstop()
	qwg.Wait()
	// Galera applies a batch on the other nodes only after its COMMIT has
	// returned on the node that ran it, and the server reads without
	// wsrep_sync_wait: a read served right after the drain by a node that
	// has not applied the last batches yet misses them (on the test bed, 6
	// ms after node 3 committed the last batch of 8 traces, node 1 had not
	// applied it). The read-back's requests come one at a time and all run
	// on the pool's most recently used connection, one node, so /traceMany
	// and /dependencies would come out short by the same traces, as for a
	// batch lost everywhere (what the CI failure of 4 traces was: see
	// mysqlstore's txLostError). A client reading through that node sees the
	// same for as long as it lags. So the read-back first waits until every
	// node has applied every write committed before: that makes no missing
	// write appear, so a span stored on no node, or missing from one node for
	// good, still fails below, and galeraHolders then says which it is.
	t0 := time.Now()
	if err := g.WaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("queue drained; every node applied every write within %s", time.Since(t0).Round(time.Millisecond))

	accepted, refused := ing.result()
	elapsed := ing.elapsed()
	t.Logf("ingest: %d traces (%d spans) accepted in %s (%.0f spans/s), %d POSTs refused (503/error, not counted as accepted)",
		len(accepted), 3*len(accepted), elapsed.Round(time.Millisecond), float64(3*len(accepted))/elapsed.Seconds(), refused)

	// Queries: no error and no answer over 2 s but within 2 s of the kill.
	excused := func(q galeraQuery) bool {
		in := func(x time.Time) bool { return !x.Before(killAt) && x.Before(killAt.Add(2*time.Second)) }
		return in(q.at) || in(q.at.Add(q.took))
	}
	var worst time.Duration
	for _, q := range qs.all() {
		worst = max(worst, q.took)
		if excused(q) {
			continue
		}
		if q.err != "" {
			t.Errorf("query %s at +%s (kill at +%s): took %s, error %q", q.path, q.at.Sub(qs.start()).Round(time.Millisecond),
				killAt.Sub(qs.start()).Round(time.Millisecond), q.took.Round(time.Millisecond), q.err)
		}
	}
	slow := 0
	for _, q := range qs.all() {
		if q.took > 2*time.Second && slow < 10 {
			slow++
			t.Logf("slow query %s at +%s (kill at +%s, restart at +%s): %s", q.path, q.at.Sub(qs.start()).Round(time.Millisecond),
				killAt.Sub(qs.start()).Round(time.Millisecond), restartAt.Sub(qs.start()).Round(time.Millisecond), q.took.Round(time.Millisecond))
		}
	}
	inWindow := 0
	for _, q := range qs.all() {
		if excused(q) && q.err != "" {
			inWindow++
		}
	}
	t.Logf("queries: %d answered, %d failed within 2 s of the kill, none after; slowest %s, p99 %s, p50 %s",
		len(qs.all()), inWindow, worst.Round(time.Millisecond), qs.pct(99).Round(time.Millisecond), qs.pct(50).Round(time.Millisecond))

	// Every accepted span, read back.
	lost := 0
	var lostIDs []string
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for start := 0; start < len(ids); start += 100 {
		chunk := ids[start:min(start+100, len(ids))]
		code, body := httpGet(t, base+"/api/v2/traceMany?traceIds="+strings.Join(chunk, ","))
		if code != 200 {
			t.Fatalf("traceMany: %d %s", code, body)
		}
		var traces [][]struct {
			TraceID string `json:"traceId"`
			ID      string `json:"id"`
		}
		if err := json.Unmarshal(body, &traces); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, tr := range traces {
			for _, sp := range tr {
				got[sp.TraceID]++
			}
		}
		for _, id := range chunk {
			if got[id] != 3 {
				lost += 3 - got[id]
				lostIDs = append(lostIDs, id)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d accepted spans not read back, of traces %s", lost, strings.Join(lostIDs[:min(len(lostIDs), 10)], ","))
		galeraHolders(ctx, t, g, lostIDs[:min(len(lostIDs), 10)])
	}
	// The aggregated dependency graph counts each trace once.
	end := time.Now().Add(time.Hour).UnixMilli()
	code, body := httpGet(t, fmt.Sprintf("%s/api/v2/dependencies?endTs=%d&lookback=%d", base, end, 2*86_400_000))
	var links []struct {
		Parent, Child string
		CallCount     int `json:"callCount"`
	}
	if err := json.Unmarshal(body, &links); code != 200 || err != nil {
		t.Fatalf("dependencies: %d %v %s", code, err, body)
	}
	calls := 0
	for _, l := range links {
		if l.Parent == "frontend" && l.Child == "backend" {
			calls = l.CallCount
		}
	}
	stored := earlier + earlierMaybe + len(accepted) + ing.unsure()
	if calls < earlier+len(accepted) || calls > stored {
		t.Errorf("dependencies frontend→backend callCount %d, want %d (the accepted traces, %d of them before the kill test; up to %d with the refused ones that may have been stored)",
			calls, earlier+len(accepted), earlier, stored)
	}
	t.Logf("read back: %d of %d accepted spans; dependencies frontend→backend %d calls", 3*len(accepted)-lost, 3*len(accepted), calls)
}

// galeraIngest POSTs traces of three spans (frontend SERVER, its CLIENT
// call, backend's shared SERVER span) in batches of ten.
type galeraIngest struct {
	t      *testing.T
	base   string
	client *http.Client

	mu       sync.Mutex
	accepted map[string]bool
	refused  int
	maybe    int // traces of refused POSTs (a 503 after a partial read is not stored, but an error may have been)
	begin    time.Time
	last     time.Time
}

func (g *galeraIngest) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.accepted, g.refused, g.maybe, g.begin = map[string]bool{}, 0, 0, time.Now()
}

func (g *galeraIngest) result() (map[string]bool, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.accepted, g.refused
}

func (g *galeraIngest) unsure() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.maybe
}

func (g *galeraIngest) elapsed() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last.Sub(g.begin)
}

func (g *galeraIngest) post(ctx context.Context) {
	now := time.Now().UnixMicro()
	var b bytes.Buffer
	ids := make([]string, 10)
	b.WriteByte('[')
	for i := range ids {
		tid := fmt.Sprintf("%016x%016x", rand.Uint64()|1, rand.Uint64()|1)
		ids[i] = tid
		root, call := fmt.Sprintf("%016x", rand.Uint64()|1), fmt.Sprintf("%016x", rand.Uint64()|1)
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"traceId":"%s","id":"%s","name":"get /","kind":"SERVER","timestamp":%d,"duration":900,"localEndpoint":{"serviceName":"frontend"},"tags":{"http.method":"GET"}},`, tid, root, now)
		fmt.Fprintf(&b, `{"traceId":"%s","parentId":"%s","id":"%s","name":"get /api","kind":"CLIENT","timestamp":%d,"duration":500,"localEndpoint":{"serviceName":"frontend"},"remoteEndpoint":{"serviceName":"backend"}},`, tid, root, call, now+100)
		fmt.Fprintf(&b, `{"traceId":"%s","parentId":"%s","id":"%s","name":"get /api","kind":"SERVER","shared":true,"timestamp":%d,"duration":400,"localEndpoint":{"serviceName":"backend"}}`, tid, root, call, now+150)
	}
	b.WriteByte(']')
	req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), "POST", g.base+"/api/v2/spans", &b)
	req.Header.Set("Content-Type", "application/json")
	resp, err := g.client.Do(req)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last = time.Now()
	if err != nil {
		g.refused++
		g.maybe += len(ids)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		g.refused++
		return
	}
	for _, id := range ids {
		g.accepted[id] = true
	}
}

// paced posts batches at rate spans/s until ctx ends.
func (g *galeraIngest) paced(ctx context.Context, rate float64) {
	every := time.Duration(float64(time.Second) * 30 / rate)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			g.post(ctx)
		}
	}
}

// saturation posts from four goroutines as fast as answers come for d,
// waits until the queue is drained, and returns the spans stored per
// second over the whole time.
func (g *galeraIngest) saturation(d time.Duration) float64 {
	g.reset()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				g.post(ctx)
			}
		}()
	}
	wg.Wait()
	waitDrained(g.t, g.base, 2*time.Minute)
	accepted, _ := g.result()
	return float64(3*len(accepted)) / time.Since(start).Seconds()
}

type galeraQuery struct {
	path string
	at   time.Time
	took time.Duration
	err  string
}

// galeraQueries runs the query endpoints in turn every 50 ms.
type galeraQueries struct {
	base   string
	client *http.Client

	mu    sync.Mutex
	begin time.Time
	qs    []galeraQuery
}

func (q *galeraQueries) start() time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.begin
}

func (q *galeraQueries) all() []galeraQuery {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]galeraQuery(nil), q.qs...)
}

func (q *galeraQueries) pct(p int) time.Duration {
	all := q.all()
	if len(all) == 0 {
		return 0
	}
	d := make([]time.Duration, len(all))
	for i, x := range all {
		d[i] = x.took
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)*p/100]
}

func (q *galeraQueries) run(ctx context.Context) {
	q.mu.Lock()
	q.begin = time.Now()
	q.mu.Unlock()
	// The tag search scans zipkin_annotations (no schema addition for it
	// here) and takes seconds on a loaded machine: the timeout is the
	// server's own bound, not the bar (the bar is errors).
	client := &http.Client{Timeout: 60 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		end := time.Now().UnixMilli()
		path := []string{
			"/api/v2/services",
			"/api/v2/traces?serviceName=frontend&limit=10",
			fmt.Sprintf("/api/v2/dependencies?endTs=%d&lookback=3600000", end),
			"/api/v2/spans?serviceName=backend",
			"/api/v2/traces?annotationQuery=http.method%3DGET&limit=5",
		}[i%5]
		at := time.Now()
		resp, err := client.Get(q.base + path)
		msg := ""
		if err != nil {
			msg = err.Error()
		} else {
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				msg = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(b.String()))
			}
		}
		q.mu.Lock()
		q.qs = append(q.qs, galeraQuery{path: path, at: at, took: time.Since(at), err: msg})
		q.mu.Unlock()
	}
}

// galeraHolders logs, for each node, how many span rows of each trace it
// holds (read causally), so that a failed read-back tells a batch stored on
// no node from one that a node lacks.
func galeraHolders(ctx context.Context, t *testing.T, g *mysqltest.Galera, traceIDs []string) {
	t.Helper()
	for n := 1; n <= mysqltest.GaleraNodes; n++ {
		db, err := sql.Open("mysql", strings.Replace(g.DSN(n), "/test?", "/zipkin?", 1)+"&wsrep_sync_wait=1")
		if err != nil {
			t.Fatal(err)
		}
		counts := make([]string, 0, len(traceIDs))
		for _, id := range traceIDs {
			var low uint64
			var c int
			_, err := fmt.Sscanf(id[len(id)-16:], "%016x", &low)
			if err == nil {
				err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM zipkin_spans WHERE trace_id = ?", int64(low)).Scan(&c)
			}
			if err != nil {
				counts = append(counts, id+": "+err.Error())
				continue
			}
			counts = append(counts, fmt.Sprintf("%s: %d", id, c))
		}
		db.Close()
		t.Logf("node %d holds span rows of the traces not read back: %s", n, strings.Join(counts, ", "))
	}
}
