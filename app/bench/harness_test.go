package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

func TestStudentT(t *testing.T) {
	// Two-sided 99.9 % critical values (p = 0.9995) from standard tables.
	for _, c := range []struct{ df, want float64 }{
		{1, 636.619}, {2, 31.599}, {4, 8.610}, {7, 5.408}, {9, 4.781}, {14, 4.140}, {29, 3.659}, {1e6, 3.291},
	} {
		if got := StudentT(0.9995, c.df); math.Abs(got-c.want) > 1e-3*c.want {
			t.Errorf("StudentT(0.9995, %v) = %.4f, want %.3f", c.df, got, c.want)
		}
	}
	if got := StudentT(0.975, 10); math.Abs(got-2.228) > 1e-3 {
		t.Errorf("StudentT(0.975, 10) = %.4f, want 2.228", got)
	}
	if got := StudentT(0.025, 10); math.Abs(got+2.228) > 1e-3 {
		t.Errorf("StudentT(0.025, 10) = %.4f, want -2.228", got)
	}
	if !math.IsNaN(StudentT(1, 3)) || !math.IsNaN(StudentT(0.9, 0)) {
		t.Error("StudentT outside its domain should be NaN")
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{1, 2, 3, 4, 5})
	// JMH: mean 3, sd √2.5, error t(0.9995,4)·sd/√5.
	wantErr := 8.6103 * math.Sqrt(2.5) / math.Sqrt(5)
	if s.N != 5 || s.Score != 3 || s.Min != 1 || s.Max != 5 || math.Abs(s.Error-wantErr) > 1e-3 {
		t.Errorf("Summarize = %+v, want score 3 ± %.4f, min 1, max 5", s, wantErr)
	}
	if one := Summarize([]float64{7}); one.Score != 7 || !math.IsNaN(one.Error) {
		t.Errorf("one sample: %+v, want score 7 and NaN error", one)
	}
	if none := Summarize(nil); none.N != 0 || !math.IsNaN(none.Score) {
		t.Errorf("no sample: %+v", none)
	}
}

func TestRatio(t *testing.T) {
	a := Summary{Score: 10, Error: 1}
	b := Summary{Score: 5, Error: 1}
	q := RatioOf(a, b)
	if q.Value != 2 || math.Abs(q.Lo-9.0/6) > 1e-12 || math.Abs(q.Hi-11.0/4) > 1e-12 || q.Verdict() != "faster" {
		t.Errorf("RatioOf = %+v (%s)", q, q.Verdict())
	}
	if v := RatioOf(b, a).Verdict(); v != "slower" {
		t.Errorf("verdict %q, want slower", v)
	}
	if v := RatioOf(Summary{Score: 10, Error: 3}, Summary{Score: 9, Error: 3}).Verdict(); v != "same within error" {
		t.Errorf("verdict %q, want same within error", v)
	}
	if v := RatioOf(Summary{Score: 10, Error: math.NaN()}, b).Verdict(); v != "no error bars" {
		t.Errorf("verdict %q, want no error bars", v)
	}
}

func TestHistogram(t *testing.T) {
	h := NewHistogram()
	for v := int64(1); v <= 100000; v++ {
		h.Record(v * 1000) // 1 µs … 100 ms, uniform
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		want := q * 100000 * 1000
		if got := float64(h.Quantile(q)); got < want || got > want*1.016 {
			t.Errorf("Quantile(%v) = %v, want within [%v, +1.6%%]", q, got, want)
		}
	}
	if h.Max() != 100000*1000 || h.Quantile(1) != h.Max() || h.Count() != 100000 {
		t.Errorf("max %d, q1 %d, count %d", h.Max(), h.Quantile(1), h.Count())
	}
	small := NewHistogram()
	for v := int64(0); v < 64; v++ {
		small.Record(v)
	}
	if small.Quantile(0.5) != 31 {
		t.Errorf("small values are exact: median %d, want 31", small.Quantile(0.5))
	}
	small.Record(-5)      // clamped to 0
	small.Record(1 << 50) // clamped to the last bucket, max stays exact
	back := HistogramFromSparse(h.Sparse(), h.Max())
	back.Merge(small)
	if back.Count() != h.Count()+small.Count() || back.Max() != 1<<50 {
		t.Errorf("merged count %d max %d", back.Count(), back.Max())
	}
	if histIndex(1<<40-1) != len(h.counts)-1 {
		t.Errorf("last bucket %d, have %d", histIndex(1<<40-1), len(h.counts))
	}
	for i := 0; i < len(h.counts); i++ {
		if histIndex(histUpper(i)) != i || (i > 0 && histIndex(histUpper(i-1)+1) != i) {
			t.Fatalf("bucket %d: bounds do not round-trip", i)
		}
	}
	if NewHistogram().Quantile(0.5) != 0 {
		t.Error("empty histogram quantile should be 0")
	}
}

func TestStubThroughPools(t *testing.T) {
	ctx := context.Background()
	for _, kind := range AllPools {
		d, err := OpenPool(kind, StubConnector{}, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := CycleConnection(ctx, d); err != nil {
				t.Fatalf("%s: cycleConnection: %v", kind, err)
			}
			if err := CycleStatement(ctx, d); err != nil {
				t.Fatalf("%s: cycleStatement: %v", kind, err)
			}
			if err := CycleParamStatement(ctx, d, int64(i+40)); err != nil {
				t.Fatalf("%s: cycleParamStatement: %v", kind, err)
			}
			if err := CycleInsert(ctx, d); err != nil {
				t.Fatalf("%s: cycleInsert: %v", kind, err)
			}
			if err := CycleInsertAutocommit(ctx, d); err != nil {
				t.Fatalf("%s: cycleInsertAutocommit: %v", kind, err)
			}
		}
		if d.Pool != nil {
			st := d.Pool.Stats()
			if st.Total != 2 || st.Validations != 0 || st.ReleasePlans != 0 {
				t.Errorf("%s: %v: want 2 connections, no validation, no release plan", kind, st)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := OpenPool("hikari", StubConnector{}, 2, nil); err == nil {
		t.Error("unknown pool kind accepted")
	}
}

func TestClosedLoop(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	it, err := closedLoop(3, 30*time.Millisecond, func(int) (func(context.Context) error, error) {
		return func(context.Context) error {
			mu.Lock()
			calls++
			mu.Unlock()
			time.Sleep(time.Millisecond)
			return nil
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if it.Ops < 3 || it.AllOps != int64(calls) || it.AllOps < it.Ops || it.AllOps > it.Ops+3 {
		t.Errorf("ops %d, all %d, calls %d", it.Ops, it.AllOps, calls)
	}
	if it.Elapsed < 30*time.Millisecond {
		t.Errorf("elapsed %v < window", it.Elapsed)
	}
}

// TestSaturatedLoop: per-goroutine counts add up to the iteration's, every completed operation's
// latency is recorded, and a goroutine that completes nothing in the window shows as the
// slowest with 0.
func TestSaturatedLoop(t *testing.T) {
	var first sync.Once
	it, h, per, err := saturatedLoop(4, 30*time.Millisecond, func(ctx context.Context, h *Histogram) error {
		stuck := false
		first.Do(func() { stuck = true })
		if stuck {
			time.Sleep(60 * time.Millisecond) // outlasts the window: counted in AllOps only
		}
		h.Record(int64(time.Millisecond))
		time.Sleep(time.Millisecond)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, n := range per {
		sum += n
	}
	if len(per) != 4 || sum != it.Ops || it.Ops < 3 {
		t.Errorf("per-goroutine %v (sum %d), iteration ops %d", per, sum, it.Ops)
	}
	if h.Count() != uint64(it.AllOps) {
		t.Errorf("%d latencies recorded, %d operations completed", h.Count(), it.AllOps)
	}
	slow, med, mean := goroutineOps(per)
	if slow != 0 || med <= 0 || mean <= 0 {
		t.Errorf("slowest %v, median %v, mean %v; want 0 for the stuck goroutine", slow, med, mean)
	}
	if s, m, avg := goroutineOps([]int64{4, 1, 3, 2}); s != 1 || m != 2.5 || avg != 2.5 {
		t.Errorf("goroutineOps(4,1,3,2) = %v, %v, %v; want 1, 2.5, 2.5", s, m, avg)
	}
	if s, m, avg := goroutineOps([]int64{5, 1, 9}); s != 1 || m != 5 || avg != 5 {
		t.Errorf("goroutineOps(5,1,9) = %v, %v, %v; want 1, 5, 5", s, m, avg)
	}
}

// TestOpenLoopCountsLateness: one request that blocks for 50 ms on a 1 ms schedule makes
// every request queued behind it late; their latency, from the schedule, shows it.
func TestOpenLoopCountsLateness(t *testing.T) {
	var once sync.Once
	it, h, err := openLoop(1, 100*time.Millisecond, 1, func(_ context.Context, sched time.Time, h *Histogram) error {
		h.Record(int64(time.Since(sched)))
		once.Do(func() { time.Sleep(50 * time.Millisecond) })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if it.Ops < 90 || it.Ops > 101 {
		t.Errorf("ops %d, want ~100 (1/ms for 100 ms)", it.Ops)
	}
	// About 50 requests were due while the first one slept: their latencies run from ~49 ms
	// down to ~1 ms, so the 75th percentile is ~25 ms although the service time is ~0.
	if p75 := time.Duration(h.Quantile(0.75)); p75 < 15*time.Millisecond {
		t.Errorf("p75 %v: lateness behind the slow request was not counted", p75)
	}
	if mx := time.Duration(h.Max()); mx < 40*time.Millisecond {
		t.Errorf("max %v, want ≥ 40ms", mx)
	}
}

func TestOpenLoopMissed(t *testing.T) {
	// Each request takes 30 ms on a 1 ms schedule for a 20 ms window: the goroutine is still
	// behind at 2× the window and gives up on the rest.
	it, h, err := openLoop(1, 20*time.Millisecond, 1, func(_ context.Context, sched time.Time, h *Histogram) error {
		h.Record(int64(time.Since(sched)))
		time.Sleep(30 * time.Millisecond)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if it.Ops < 1 || it.Missed < 10 || int64(h.Count()) != it.Ops+it.Missed {
		t.Errorf("ops %d missed %d recorded %d", it.Ops, it.Missed, h.Count())
	}
}

func TestRunBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-bogus"},
		{"-bench", "cycleNothing"},
		{"-pools", "hikari"},
		{"-threads", "0"},
		{"-threads", "four"},
		{"-contended-threads", ""},
		{"-size", "0"},
		{"-iterations", "0"},
		{"-warmup", "-1"},
		{"-iteration-time", "0s"},
		{"-iteration-time", "soon"},
		{"-forks", "-1"},
		{"-format", "xml"},
		{"-rate", "-3"},
		{"-rate-fraction", "0"},
		{"-hold", "-1ms"},
		{"-saturated-threads", "0"},
		{"-stub", "-dsn", "root@tcp(127.0.0.1:3306)/test"},
		{"-stub", "extra"},
	} {
		var out, errb bytes.Buffer
		if code := Run(args, &out, &errb); code != ExitUsage {
			t.Errorf("Run(%q) = %d, want %d; stderr: %s", args, code, ExitUsage, errb.String())
		}
		if !strings.Contains(errb.String(), "usage: jmh") {
			t.Errorf("Run(%q): no usage on stderr: %s", args, errb.String())
		}
		if strings.Contains(errb.String(), ChildFlag) {
			t.Errorf("Run(%q): usage shows the hidden flag", args)
		}
		if out.Len() != 0 {
			t.Errorf("Run(%q) wrote to stdout: %s", args, out.String())
		}
	}
	var errb bytes.Buffer
	if code := Run([]string{"-h"}, &bytes.Buffer{}, &errb); code != ExitOK || !strings.Contains(errb.String(), "-iteration-time") {
		t.Errorf("-h: code %d, stderr %s", code, errb.String())
	}
}

func TestRunUnreachableDSN(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fault test: waits out a 5 s ping timeout")
	}
	// Nothing listens: refused at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	_ = l.Close()

	// Accepts and never answers: the ping must give up on its own.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range held {
			_ = c.Close()
		}
		mu.Unlock()
	}()

	for _, c := range []struct{ addr, want string }{
		{refused, "connection refused"},
		{silent.Addr().String(), "within 5s"},
	} {
		var out, errb bytes.Buffer
		start := time.Now()
		code := Run([]string{"-dsn", "u:secret@tcp(" + c.addr + ")/test", "-forks", "0"}, &out, &errb)
		took := time.Since(start)
		if code != ExitError {
			t.Errorf("%s: code %d, want %d", c.addr, code, ExitError)
		}
		if took > 10*time.Second {
			t.Errorf("%s: took %v, want < 10s", c.addr, took)
		}
		msg := errb.String()
		if !strings.Contains(msg, c.want) || !strings.Contains(msg, c.addr) || strings.Contains(msg, "secret") {
			t.Errorf("%s: stderr %q should name the error (%q) and the address, not the password", c.addr, msg, c.want)
		}
	}
}

// jsonFields are the fields every -format json result has, and those contended adds.
var (
	jsonFields          = []string{"benchmark", "pool", "threads", "ops_per_ms", "error", "min", "max", "bytes_per_op", "round_trips_per_op"}
	jsonContendedFields = []string{"p50_us", "p99_us", "p999_us", "max_us", "p999_iter_us"}
	jsonSaturatedFields = []string{"p50_us", "p99_us", "p999_us", "max_us", "p999_iter_us", "hold_us", "slowest_ops",
		"median_ops", "mean_ops", "slowest_share"}
)

func parseJSONLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var res []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("stdout line is not JSON: %q: %v", sc.Text(), err)
		}
		res = append(res, m)
	}
	return res
}

func checkFields(t *testing.T, m map[string]any) {
	t.Helper()
	for _, f := range jsonFields {
		if _, ok := m[f]; !ok {
			t.Errorf("%v/%v: no field %q", m["benchmark"], m["pool"], f)
		}
	}
	if m["benchmark"] == BenchSaturated {
		for _, f := range jsonSaturatedFields {
			if v, ok := m[f].(float64); !ok || v < 0 {
				t.Errorf("saturated/%v: field %q = %v", m["pool"], f, m[f])
			}
		}
		if _, ok := m["rate_per_ms"]; ok {
			t.Errorf("saturated/%v: has contended's rate_per_ms", m["pool"])
		}
	} else if m["benchmark"] == BenchContended {
		for _, f := range jsonContendedFields {
			if v, ok := m[f].(float64); !ok || v < 0 {
				t.Errorf("contended/%v: field %q = %v", m["pool"], f, m[f])
			}
		}
	} else {
		for _, f := range jsonContendedFields {
			if _, ok := m[f]; ok {
				t.Errorf("%v: has contended field %q", m["benchmark"], f)
			}
		}
	}
}

func TestRunStubJSON(t *testing.T) {
	var out, errb bytes.Buffer
	code := Run([]string{"-stub", "-forks", "0", "-format", "json", "-threads", "1,3", "-contended-threads", "16",
		"-saturated-threads", "12", "-hold", "1ms", "-warmup", "1", "-iterations", "2", "-iteration-time", "30ms", "-size", "2"}, &out, &errb)
	if code != ExitOK {
		t.Fatalf("code %d; stderr:\n%s", code, errb.String())
	}
	res := parseJSONLines(t, out.String())
	if want := 5*2*len(AllPools) + 2*len(AllPools); len(res) != want { // 5 closed-loop benchmarks × 2 thread counts, contended, saturated
		t.Fatalf("%d results, want %d", len(res), want)
	}
	for _, m := range res {
		checkFields(t, m)
		if m["bytes_per_op"] != nil || m["round_trips_per_op"] != nil {
			t.Errorf("%v/%v: traffic on the stub should be null", m["benchmark"], m["pool"])
		}
		if ops, _ := m["ops_per_ms"].(float64); ops <= 0 {
			t.Errorf("%v/%v: ops_per_ms %v", m["benchmark"], m["pool"], m["ops_per_ms"])
		}
		if s, _ := m["samples"].(float64); s != 2 {
			t.Errorf("samples %v, want 2", m["samples"])
		}
		if _, ok := m["error"].(float64); !ok {
			t.Errorf("error %v, want a number with 2 samples", m["error"])
		}
	}
	for _, want := range []string{"# Run progress:", "Iteration   1:", "# Warmup Iteration   1:", "# machine: nproc"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
}

func TestRunStubTableAndForks(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the harness in forked processes (about 10 s)")
	}
	var out, errb bytes.Buffer
	code := Run([]string{"-stub", "-forks", "2", "-bench", "cycleStatement", "-pools", "sqlpool,database-sql",
		"-threads", "2", "-warmup", "0", "-iterations", "2", "-iteration-time", "20ms"}, &out, &errb)
	if code != ExitOK {
		t.Fatalf("code %d; stderr:\n%s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{"# Fork: 2 of 2", "Iteration   2:", "±(99.9%)", "Result \"cycleStatement pool=sqlpool threads=2\"",
		"Benchmark", "Ratios to database-sql", "sqlpool"} {
		if !strings.Contains(s, want) {
			t.Errorf("table output lacks %q:\n%s", want, s)
		}
	}
	// Forks are interleaved: fork 1 of both pools before fork 2 of either.
	first2 := strings.Index(s, "# Fork: 2 of 2")
	if n := strings.Count(s[:max(first2, 0)], "# Fork: 1 of 2"); n != 2 {
		t.Errorf("%d runs of fork 1 before the first fork 2, want 2 (one per pool)", n)
	}
	// 2 forks × 2 iterations = 4 samples per result.
	if !strings.Contains(s, "cycleStatement       sqlpool        2    4") {
		t.Errorf("want 4 samples (2 forks × 2 iterations) in the table:\n%s", s)
	}
}

// TestRunEmbeddedTraffic runs jmh on the embedded server and checks the traffic figures that
// the bar rests on: a clean sqlpool cycle sends nothing, naive-safe sends its ping and
// rollback, and the statement cache saves round trips on a parameterized query.
func TestRunEmbeddedTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an embedded server")
	}
	var out, errb bytes.Buffer
	code := Run([]string{"-forks", "0", "-format", "json", "-bench", "cycleConnection,cycleParamStatement,cycleInsert,cycleInsertAutocommit,contended",
		"-threads", "2", "-contended-threads", "8", "-rate", "2", "-warmup", "1", "-iterations", "1",
		"-iteration-time", "100ms", "-size", "2"}, &out, &errb)
	if code != ExitOK {
		t.Fatalf("code %d; stderr:\n%s", code, errb.String())
	}
	rt := map[string]float64{}
	bytesPer := map[string]float64{}
	for _, m := range parseJSONLines(t, out.String()) {
		checkFields(t, m)
		if m["target"] != "embedded" {
			t.Errorf("target %v", m["target"])
		}
		key := m["benchmark"].(string) + "/" + m["pool"].(string)
		r, ok1 := m["round_trips_per_op"].(float64)
		b, ok2 := m["bytes_per_op"].(float64)
		if !ok1 || !ok2 {
			t.Fatalf("%s: no traffic figures: %v", key, m)
		}
		rt[key], bytesPer[key] = r, b
		if nc, _ := m["new_conns"].(float64); nc != 0 {
			t.Errorf("%s: %v connections dialled during measurement", key, nc)
		}
	}
	for _, p := range []string{PoolSqlpool, PoolDatabaseSQL} {
		if b := bytesPer["cycleConnection/"+p]; b != 0 {
			t.Errorf("cycleConnection/%s: %v bytes/op, want 0", p, b)
		}
	}
	if r := rt["cycleConnection/naive-safe"]; r < 1.99 || r > 2.01 {
		t.Errorf("cycleConnection/naive-safe: %v round trips/op, want 2 (ping, rollback)", r)
	}
	if a, b := rt["cycleParamStatement/sqlpool"], rt["cycleParamStatement/database-sql"]; !(a < b) || a > 1.01 {
		t.Errorf("cycleParamStatement: sqlpool %v round trips/op, database-sql %v: want ~1 < ~3", a, b)
	}
	// An insert cycle's generated id costs nothing more: the same round trips as plain
	// database/sql (autocommit: 1; transaction: 3).
	for _, b := range []string{BenchCycleInsert, BenchCycleInsertAutocommit} {
		if a, d := rt[b+"/sqlpool"], rt[b+"/database-sql"]; a != d || a < 1 {
			t.Errorf("%s: sqlpool %v round trips/op, database-sql %v: want the same", b, a, d)
		}
	}
}

// TestCycleInsertServerStatements counts, at a MariaDB server (MYSQL_TEST_DSN), the statements
// an insert cycle runs (the session's Questions, one connection per pool) and the packets it
// sends (the counting proxy): the pool's equal plain database/sql's.
func TestCycleInsertServerStatements(t *testing.T) {
	mysqltest.RequireMariaDB(t, "counts statements with MariaDB's session status")
	tg, err := OpenServer(mysqltest.DSN(t), true)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	ctx := context.Background()
	const ops = 200
	for _, b := range []string{BenchCycleInsert, BenchCycleInsertAutocommit} {
		stmts, packets := map[string]float64{}, map[string]float64{}
		for _, kind := range AllPools {
			if err := tg.PrepareInsertTable(); err != nil {
				t.Fatal(err)
			}
			d, err := OpenPool(kind, tg.Connector(), 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			questions := func() float64 {
				var name string
				var n float64
				if err := d.DB.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			op, err := closedOp(b, d, 0)
			if err != nil {
				t.Fatal(err)
			}
			q0 := questions()
			tg.ResetCounts()
			for range ops {
				if err := op(ctx); err != nil {
					t.Fatalf("%s/%s: %v", b, kind, err)
				}
			}
			c := tg.Counts()
			stmts[kind] = (questions() - q0 - 1) / ops // less the SHOW itself
			packets[kind] = float64(c.ClientPackets) / ops
			_ = d.Close()
		}
		t.Logf("%s: statements/op at the server %v, client packets/op %v", b, stmts, packets)
		if stmts[PoolSqlpool] != stmts[PoolDatabaseSQL] || packets[PoolSqlpool] != packets[PoolDatabaseSQL] {
			t.Errorf("%s: sqlpool %v statements and %v packets per op, database-sql %v and %v: want the same",
				b, stmts[PoolSqlpool], packets[PoolSqlpool], stmts[PoolDatabaseSQL], packets[PoolDatabaseSQL])
		}
	}
	if err := tg.PrepareInsertTable(); err != nil { // leave it empty
		t.Fatal(err)
	}
}

// TestOpenDBKeepsIdle pins what the report says about p.OpenDB(): database/sql keeps a
// returned connection idle in its own list.
func TestOpenDBKeepsIdle(t *testing.T) {
	p, err := pool.New(StubConnector{}, pool.Config{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	db := p.OpenDB()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	if got := db.Stats().Idle; got != 1 {
		t.Errorf("OpenDB(): database/sql holds %d idle, want 1", got)
	}
	_ = db.Close()
}
