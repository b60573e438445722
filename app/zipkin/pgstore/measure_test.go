package pgstore

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	_ "github.com/sqlpool/sqlpool/pgdialect" // the pool's PostgreSQL rules
	"github.com/sqlpool/sqlpool/pool"
)

// TestMeasureIngest compares, on PG_TEST_DSN's server, three ways of writing
// the same spans, in interleaved rounds: Accept on the sqlpool pool (rows
// built from model.Span, COPY through sql.Conn.Raw, names), a raw pgx COPY of
// the prebuilt rows, and a raw multi-row INSERT … ON CONFLICT DO NOTHING of
// them, each into its own schema with the same tables and indexes, from
// PGSTORE_MEASURE_WRITERS goroutines (default 4) in batches of
// PGSTORE_MEASURE_BATCH spans (default 1000), PGSTORE_MEASURE_BATCHES
// batches per method per round (default 10), PGSTORE_MEASURE_ROUNDS rounds
// (default 15), each in a shuffled order. It runs only with
// PGSTORE_MEASURE=1 (docs/design/pgstore.md has the commands).
func TestMeasureIngest(t *testing.T) {
	if os.Getenv("PGSTORE_MEASURE") != "1" || os.Getenv("PG_TEST_DSN") == "" {
		t.Skip("set PGSTORE_MEASURE=1 and PG_TEST_DSN (a server with the settings to measure)")
	}
	dsn := os.Getenv("PG_TEST_DSN")
	writers, batch, batches, rounds := envN("PGSTORE_MEASURE_WRITERS", 4), envN("PGSTORE_MEASURE_BATCH", 1000),
		envN("PGSTORE_MEASURE_BATCHES", 10), envN("PGSTORE_MEASURE_ROUNDS", 15)
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
	t.Logf("server: %v; %d writers, batches of %d spans, %d batches per method per round, %d rounds", settings, writers, batch, batches, rounds)
	methods := []string{"accept", "copy", "insert"}
	dsnOf := map[string]string{}
	for _, m := range methods {
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
	store, err := Open(ctx, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw := map[string][]*pgx.Conn{}
	for _, m := range methods[1:] {
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
	spansPerSec := map[string][]float64{}
	for r := range rounds {
		order := []string{"accept", "copy", "insert"}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, m := range order {
			work := gen()
			// Raw methods get their rows prebuilt, outside the timing.
			var copyRows [][][]any
			var insertArgs [][]any
			if m != "accept" {
				for _, b := range work {
					var rows [][]any
					var args []any
					for i := range b {
						row, _ := buildRow(&b[i])
						rows = append(rows, row.copyValues())
						args = row.textValues(args)
					}
					copyRows, insertArgs = append(copyRows, rows), append(insertArgs, args)
				}
			}
			sqlText := insertSQL(batch)
			next := make(chan int, len(work))
			for i := range work {
				next <- i
			}
			close(next)
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			t0 := time.Now()
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
							_, err = raw[m][w].CopyFrom(ctx, pgx.Identifier{tableSpans}, spanColumns, pgx.CopyFromRows(copyRows[i]))
						case "insert":
							_, err = raw[m][w].Exec(ctx, sqlText, insertArgs[i]...)
						}
						if err != nil {
							errs <- fmt.Errorf("%s: %w", m, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(t0)
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			rate := float64(batches*batch) / el.Seconds()
			spansPerSec[m] = append(spansPerSec[m], rate)
			t.Logf("round %d %-6s %8.0f spans/s (%v)", r+1, m, rate, el.Round(time.Millisecond))
		}
	}
	med := func(v []float64) float64 { s := append([]float64(nil), v...); sort.Float64s(s); return s[len(s)/2] }
	a, c, i := med(spansPerSec["accept"]), med(spansPerSec["copy"]), med(spansPerSec["insert"])
	// Ratios paired within a round (the same load on the machine).
	var ra, ri []float64
	for r := range rounds {
		ra = append(ra, spansPerSec["accept"][r]/spansPerSec["copy"][r])
		ri = append(ri, spansPerSec["insert"][r]/spansPerSec["copy"][r])
	}
	sort.Float64s(ra)
	sort.Float64s(ri)
	q := func(v []float64, f float64) float64 { return v[int(f*float64(len(v)-1))] }
	t.Logf("medians: accept %.0f, raw COPY %.0f, raw INSERT %.0f spans/s; per-round ratios: accept/COPY median %.2f (quartiles %.2f–%.2f), INSERT/COPY median %.2f (%.2f–%.2f); pool release plans %d; store %+v",
		a, c, i, q(ra, 0.5), q(ra, 0.25), q(ra, 0.75), q(ri, 0.5), q(ri, 0.25), q(ri, 0.75), p.Stats().ReleasePlans, store.Stats())
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
