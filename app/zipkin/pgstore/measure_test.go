package pgstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/app/zipkin/codec"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
	_ "github.com/sqlpool/sqlpool/pgdialect" // the pool's PostgreSQL rules
	"github.com/sqlpool/sqlpool/pool"
)

// TestMeasureIngest compares, on PG_TEST_DSN's server, four ways of writing
// the same spans, in interleaved rounds: the span server over HTTP (JSON v2
// bodies, on a Store of its own, its queue sized to hold a round), Accept on
// the sqlpool pool (rows built from model.Span, COPY through sql.Conn.Raw,
// names), a raw COPY of the prebuilt rows (the binary COPY stream the store
// sends, built outside the timing), and a raw multi-row INSERT … ON
// CONFLICT DO NOTHING of them, each into its own schema with the same
// tables and indexes, from PGSTORE_MEASURE_WRITERS goroutines (default 4)
// in batches of PGSTORE_MEASURE_BATCH spans (default 1000),
// PGSTORE_MEASURE_BATCHES batches per method per round (default 10),
// PGSTORE_MEASURE_ROUNDS rounds (default 15), each in a shuffled order
// (PGSTORE_MEASURE_METHODS, comma-separated, picks the methods). The two
// store paths drain the dependency queue while they write, every
// PGSTORE_MEASURE_DRAIN_EVERY (default 500ms; 0: only at the end), and
// once more at the end of the round, in the timing (PGSTORE_MEASURE_NODRAIN=1:
// never; PGSTORE_MEASURE_NODEPS=1: the store paths queue nothing, one COPY
// per batch, the ceiling of any dependency aggregation). Per round it logs the
// CPU time of PostgreSQL's processes and of this process per span. It
// runs only with PGSTORE_MEASURE=1 (docs/design/pgstore.md has the
// commands).
func TestMeasureIngest(t *testing.T) {
	if os.Getenv("PGSTORE_MEASURE") != "1" || os.Getenv("PG_TEST_DSN") == "" {
		t.Skip("set PGSTORE_MEASURE=1 and PG_TEST_DSN (a server with the settings to measure)")
	}
	dsn := os.Getenv("PG_TEST_DSN")
	writers, batch, batches, rounds := envN("PGSTORE_MEASURE_WRITERS", 4), envN("PGSTORE_MEASURE_BATCH", 1000),
		envN("PGSTORE_MEASURE_BATCHES", 10), envN("PGSTORE_MEASURE_ROUNDS", 15)
	serverWriters := envN("PGSTORE_MEASURE_SERVER_WRITERS", writers)
	drainEvery := 500 * time.Millisecond
	if v := os.Getenv("PGSTORE_MEASURE_DRAIN_EVERY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		drainEvery = d // 0: only at the end of the round
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var settings []string
	for _, s := range []string{"fsync", "synchronous_commit", "full_page_writes", "wal_level", "shared_buffers", "server_version"} {
		var v string
		if err := admin.QueryRow(ctx, "SELECT current_setting($1)", s).Scan(&v); err != nil {
			t.Fatal(err)
		}
		settings = append(settings, s+"="+v)
	}
	t.Logf("server: %v; %d writers (the span server's: %d), batches of %d spans, %d batches per method per round, %d rounds, store rounds drain every %v",
		settings, writers, serverWriters, batch, batches, rounds, drainEvery)
	methods := []string{"accept", "copy", "insert", "http"}
	if m := os.Getenv("PGSTORE_MEASURE_METHODS"); m != "" {
		methods = strings.Split(m, ",")
	}
	dsnOf := map[string]string{}
	for _, m := range []string{"accept", "copy", "insert", "http"} {
		schema := "measure_" + m
		for _, q := range []string{"DROP SCHEMA IF EXISTS " + schema + " CASCADE", "CREATE SCHEMA " + schema} {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		cfg, _ := pgx.ParseConfig(dsn)
		cfg.RuntimeParams["search_path"] = schema
		dsnOf[m] = schema
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range SchemaDDL() {
			if _, err := c.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		c.Close(ctx)
	}
	connCfg := func(m string) *pgx.ConnConfig {
		cfg, _ := pgx.ParseConfig(dsn)
		cfg.RuntimeParams["search_path"] = dsnOf[m]
		return cfg
	}
	// Accept on the pool.
	p, err := pool.New(stdlib.GetConnector(*connCfg("accept")), pool.Config{MaxConns: writers, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	db := p.OpenDB()
	defer func() { db.Close(); p.Close() }()
	store, err := Open(ctx, db, Options{DependencyDrainInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	// The span server over HTTP on a store of its own (its pool, its
	// schema): JSON v2 bodies POSTed by the writers, decoded, queued and
	// written by the server's writers; a round ends when every span is
	// stored.
	hp, err := pool.New(stdlib.GetConnector(*connCfg("http")), pool.Config{MaxConns: serverWriters + 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hdb := hp.OpenDB()
	defer func() { hdb.Close(); hp.Close() }()
	hstore, err := Open(ctx, hdb, Options{DependencyDrainInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	// PGSTORE_MEASURE_NODEPS=1: the store paths queue nothing for the
	// dependency aggregation (COPY alone): the ceiling of any aggregation.
	if os.Getenv("PGSTORE_MEASURE_NODEPS") == "1" {
		store.noDeps, hstore.noDeps = true, true
		t.Log("the store paths queue nothing for the dependency aggregation (PGSTORE_MEASURE_NODEPS=1)")
	}
	// PGSTORE_MEASURE_NODRAIN=1: the store paths queue their writes but
	// never drain them (what the write side of the aggregation costs).
	noDrain := os.Getenv("PGSTORE_MEASURE_NODRAIN") == "1"
	if noDrain {
		t.Log("the store paths' dependency queues are not drained (PGSTORE_MEASURE_NODRAIN=1)")
	}
	reg := prometheus.NewRegistry()
	// The queue holds a whole round, so that no POST is refused: a POST
	// refused for want of room has cost the server its decoding, and the
	// client sends it again.
	srv, err := server.New(server.Config{Storage: hstore, Writers: serverWriters, BatchSpans: batch,
		MaxQueueSpans: max(4*writers*batch, batches*batch), MaxQueueBytes: 1 << 30,
		Registerer: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer func() { hs.Close(); _ = srv.Close(ctx) }()
	raw := map[string][]*pgx.Conn{}
	for _, m := range []string{"copy", "insert"} {
		for range writers {
			c, err := pgx.ConnectConfig(ctx, connCfg(m))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			raw[m] = append(raw[m], c)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func() [][]model.Span {
		out := make([][]model.Span, batches)
		for i := range out {
			out[i] = makeSpans(rng, batch)
		}
		return out
	}
	spansPerSec, serverMicros, clientMicros := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for r := range rounds {
		order := append([]string(nil), methods...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, m := range order {
			work := gen()
			// Raw methods get their rows prebuilt, outside the timing: raw
			// COPY the binary COPY stream the store sends, so that it
			// costs its client no more than sending it.
			var copyData [][]byte
			var insertArgs [][]any
			var bodies [][]byte
			for _, b := range work {
				switch m {
				case "http":
					bodies = append(bodies, codec.AppendJSONV2Spans(nil, b))
				case "copy", "insert":
					var rows []spanRow
					var args []any
					var rb rowBuilder
					for i := range b {
						row, _ := rb.build(&b[i])
						rows = append(rows, row)
						if m == "insert" {
							args = row.textValues(args)
						}
					}
					copyData, insertArgs = append(copyData, appendCopyRows(nil, rows)), append(insertArgs, args)
				}
			}
			runtime.GC() // the garbage of building them is not collected in the timing
			st := map[string]*Store{"accept": store, "http": hstore}[m]
			if noDrain {
				st = nil
			}
			sqlText := insertSQL(batch)
			next := make(chan int, len(work))
			for i := range work {
				next <- i
			}
			close(next)
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			stored0 := hstore.Stats().Spans
			cpu0 := serverCPU(t)
			self0 := selfCPU()
			busy0, writes0 := writeSeconds(t, reg)
			retries0 := retries503.Load()
			t0 := time.Now()
			// The store's rounds drain the dependency queue while they
			// write, every drainEvery (what the server's
			// RunDependencyAggregation does off the write path, every
			// 3 s), and once more at the end, timed in the round: the
			// aggregation is paid in the round that caused it.
			stopDrain, drained := make(chan struct{}), make(chan error, 1)
			go func() {
				if st == nil || drainEvery <= 0 {
					drained <- nil
					return
				}
				tick := time.NewTicker(drainEvery)
				defer tick.Stop()
				for {
					select {
					case <-stopDrain:
						drained <- nil
						return
					case <-tick.C:
					}
					if _, err := st.DrainDependencies(ctx); err != nil {
						drained <- err
						return
					}
				}
			}()
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range next {
						var err error
						switch m {
						case "accept":
							err = store.Accept(ctx, work[i])
						case "copy":
							_, err = raw[m][w].PgConn().CopyFrom(ctx, bytes.NewReader(copyData[i]), sqlCopySpans)
						case "insert":
							_, err = raw[m][w].Exec(ctx, sqlText, insertArgs[i]...)
						case "http":
							err = post(hs.URL+"/api/v2/spans", bodies[i])
						}
						if err != nil {
							errs <- fmt.Errorf("%s: %w", m, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if m == "http" {
				for hstore.Stats().Spans-stored0 < int64(batches*batch) {
					time.Sleep(time.Millisecond) // a measurement by hand: the store has no event to wait on
				}
			}
			close(stopDrain)
			if err := <-drained; err != nil {
				t.Fatal(err)
			}
			var drain, drainCPU time.Duration
			if st != nil {
				t1, c1 := time.Now(), serverCPU(t)
				if _, err := st.DrainDependencies(ctx); err != nil {
					t.Fatal(err)
				}
				drain, drainCPU = time.Since(t1), serverCPU(t)-c1
			}
			el := time.Since(t0)
			self := selfCPU() - self0
			cpu := serverCPU(t) - cpu0
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			rate := float64(batches*batch) / el.Seconds()
			spansPerSec[m] = append(spansPerSec[m], rate)
			cpuPerSpan := float64(cpu.Microseconds()) / float64(batches*batch)
			serverMicros[m] = append(serverMicros[m], cpuPerSpan)
			selfPerSpan := float64(self.Microseconds()) / float64(batches*batch)
			clientMicros[m] = append(clientMicros[m], selfPerSpan)
			if m == "http" {
				busy, writes := writeSeconds(t, reg)
				t.Logf("http: %d writes, server writers busy %.0f%% of the round (mean write %.1f ms), %d POSTs answered 503",
					writes-writes0, 100*(busy-busy0)/el.Seconds()/float64(serverWriters), 1000*(busy-busy0)/float64(max(writes-writes0, 1)), retries503.Load()-retries0)
			}
			t.Logf("round %d %-6s %8.0f spans/s (%v, of which the final drain of the dependency queue %v, PostgreSQL CPU %.1f µs/span), PostgreSQL CPU %.1f µs/span, this process %.1f µs/span",
				r+1, m, rate, el.Round(time.Millisecond), drain.Round(time.Millisecond), float64(drainCPU.Microseconds())/float64(batches*batch), cpuPerSpan, selfPerSpan)
		}
	}
	med := func(v []float64) float64 { s := append([]float64(nil), v...); sort.Float64s(s); return s[len(s)/2] }
	for _, m := range methods {
		line := fmt.Sprintf("%-6s median %8.0f spans/s, PostgreSQL CPU %.1f µs/span, this process's CPU %.1f µs/span",
			m, med(spansPerSec[m]), med(serverMicros[m]), med(clientMicros[m]))
		// Ratios paired within a round (the same load on the machine).
		if c := spansPerSec["copy"]; m != "copy" && len(c) == rounds {
			var rs []float64
			for r := range rounds {
				rs = append(rs, spansPerSec[m][r]/c[r])
			}
			sort.Float64s(rs)
			line += fmt.Sprintf("; ÷ raw COPY per round: min %.2f, median %.2f, max %.2f", rs[0], med(rs), rs[len(rs)-1])
		}
		t.Log(line)
	}
	t.Logf("pool release plans %d (http %d); store %+v; http store %+v", p.Stats().ReleasePlans, hp.Stats().ReleasePlans, store.Stats(), hstore.Stats())
}

var retries503 atomic.Int64

// writeSeconds returns the sum and count of the span server's
// zipkin_collector_write_seconds.
func writeSeconds(t *testing.T, reg *prometheus.Registry) (float64, uint64) {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == server.NameWriteSeconds {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleSum(), h.GetSampleCount()
		}
	}
	return 0, 0
}

// selfCPU is this process's CPU time (user and system, every thread).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// post sends one JSON v2 body to the span server, again after a 503 (its
// queue full).
func post(url string, body []byte) error {
	for {
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusAccepted:
			return nil
		case http.StatusServiceUnavailable:
			retries503.Add(1)
			time.Sleep(5 * time.Millisecond)
		default:
			return fmt.Errorf("POST: HTTP %d", resp.StatusCode)
		}
	}
}

func envN(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// makeSpans returns n spans shaped like the load tool's: traces of 5 spans
// over 20 services, two tags each, one annotation on clients.
func makeSpans(rng *rand.Rand, n int) []model.Span {
	out := make([]model.Span, 0, n)
	now := time.Now().UnixMicro()
	var tid model.TraceID
	for i := range n {
		if i%5 == 0 {
			tid = model.TraceID{High: rng.Uint64() | 1, Low: rng.Uint64() | 1}
		}
		svc := "service-" + strconv.Itoa(rng.IntN(20))
		sp := model.Span{TraceID: tid, ID: model.ID(rng.Uint64() | 1), Name: "get /api/" + strconv.Itoa(rng.IntN(50)),
			Timestamp: now - int64(rng.IntN(60_000_000)), Duration: int64(rng.IntN(100_000)) + 1, Kind: model.KindServer,
			LocalEndpoint: &model.Endpoint{ServiceName: svc, IPv4: netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(256)), byte(rng.IntN(256))})},
			Tags:          map[string]string{"http.method": "GET", "http.path": "/api/" + strconv.Itoa(rng.IntN(1000))}}
		if i%5 != 0 {
			sp.ParentID = model.ID(rng.Uint64() | 1)
			sp.Kind = model.KindClient
			sp.RemoteEndpoint = &model.Endpoint{ServiceName: "service-" + strconv.Itoa(rng.IntN(20)), Port: 8080}
			sp.Annotations = []model.Annotation{{Timestamp: sp.Timestamp + 10, Value: "wire.send"}}
		}
		sp.Normalize()
		out = append(out, sp)
	}
	return out
}
