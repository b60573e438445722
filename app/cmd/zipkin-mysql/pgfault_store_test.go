package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/lib/pq"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/pgstore"
	"github.com/sqlpool/sqlpool/pool"
)

// pgFaultBatch is batch k of writer w: two traces of 10 spans with
// annotations and tags, trace IDs unique to the batch.
func pgFaultBatch(w, k int) []model.Span {
	now := time.Now().UnixMicro()
	spans := make([]model.Span, 20)
	for i := range spans {
		tid := model.TraceID{High: uint64(w + 1), Low: uint64(k)<<8 | uint64(w)<<1 | uint64(i/10)}
		sp := model.Span{TraceID: tid, ID: model.ID(i%10 + 1), Name: fmt.Sprintf("op%d", i%10), Kind: model.KindServer,
			Timestamp: now + int64(i), Duration: 150, LocalEndpoint: &model.Endpoint{ServiceName: "fault"},
			Annotations: []model.Annotation{{Timestamp: now + int64(i) + 1, Value: "ws"}}, Tags: map[string]string{"k": "v"}}
		if i%10 > 0 {
			sp.ParentID = 1
		}
		sp.Normalize()
		spans[i] = sp
	}
	return spans
}

// TestPgstoreTerminateAndRestart drives pgstore directly on the pool, with
// pgx (COPY) and with lib/pq (INSERT), from 4 writers while every backend
// of the database is terminated every 500 ms and PostgreSQL is restarted
// once (PGFAULT_DURATION, 6 s by default). The store does not retry: a batch
// whose Accept returned nil is in the database with exactly its 20 rows; a
// batch that returned an error is there whole or not at all.
func TestPgstoreTerminateAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test")
	}
	window := envDuration(t, "PGFAULT_DURATION", 6*time.Second)
	for _, drv := range []string{"pgx", "pq"} {
		t.Run(drv, func(t *testing.T) {
			pg, admin, dsn := pgFaultServer(t)
			var connector driver.Connector
			if drv == "pq" {
				c, err := pq.NewConnector(dsn)
				if err != nil {
					t.Fatal(err)
				}
				connector = c
			} else {
				cfg, err := pgx.ParseConfig(dsn)
				if err != nil {
					t.Fatal(err)
				}
				connector = stdlib.GetConnector(*cfg)
			}
			p, err := pool.New(connector, pool.Config{Name: "pgfault-" + drv, MaxConns: 4, AcquireTimeout: 10 * time.Second,
				ConnectTimeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			db := p.OpenDB()
			defer p.Close()
			defer db.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := pgstore.CreateSchema(ctx, db); err != nil {
				t.Fatal(err)
			}
			s, err := pgstore.Open(ctx, db, pgstore.Options{})
			if err != nil {
				t.Fatal(err)
			}

			type result struct {
				w, k int
				err  error
			}
			var (
				mu      sync.Mutex
				results []result
				oks     atomic.Int64
				wg      sync.WaitGroup
			)
			stop := make(chan struct{})
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := 0; ; k++ {
						select {
						case <-stop:
							return
						default:
						}
						actx, acancel := context.WithTimeout(ctx, 20*time.Second)
						err := s.Accept(actx, pgFaultBatch(w, k))
						acancel()
						if err == nil {
							oks.Add(1)
						} else {
							time.Sleep(10 * time.Millisecond) // PostgreSQL restarting: do not spin
						}
						mu.Lock()
						results = append(results, result{w, k, err})
						mu.Unlock()
					}
				}()
			}
			stopped := false
			stopWriters := func() {
				if !stopped {
					stopped = true
					close(stop)
					wg.Wait()
				}
			}
			defer stopWriters()
			progress := func(what string, more int64) {
				t.Helper()
				target := oks.Load() + more
				waitFor(t, 90*time.Second, fmt.Sprintf("%d more batches stored after %s", more, what), func() bool { return oks.Load() >= target })
			}
			progress("the start", 20)
			killer := startTerminator(admin, 500*time.Millisecond)
			defer killer.halt()
			t0 := time.Now()
			time.Sleep(window / 2)
			t1 := time.Now()
			pg.Restart(t)
			downtime := time.Since(t1)
			progress("the restart", 10)
			time.Sleep(time.Until(t0.Add(window)))
			killer.halt()
			progress("the terminations", 10)
			stopWriters()

			rows := map[[2]int64]int{}
			check := sql.OpenDB(connector)
			defer check.Close()
			r, err := check.QueryContext(ctx, "SELECT trace_id_high, trace_id, count(*) FROM zipkin_spans GROUP BY trace_id_high, trace_id")
			if err != nil {
				t.Fatal(err)
			}
			for r.Next() {
				var hi, lo int64
				var n int
				if err := r.Scan(&hi, &lo, &n); err != nil {
					t.Fatal(err)
				}
				rows[[2]int64{hi, lo}] = n
			}
			if err := r.Err(); err != nil {
				t.Fatal(err)
			}
			r.Close()
			var ok, failed, failedStored, missing, partial int
			for _, res := range results {
				b := pgFaultBatch(res.w, res.k)
				n := rows[[2]int64{int64(b[0].TraceID.High), int64(b[0].TraceID.Low)}] + rows[[2]int64{int64(b[10].TraceID.High), int64(b[10].TraceID.Low)}]
				if res.err != nil {
					failed++
					switch n {
					case 0:
					case 20:
						failedStored++ // the error came after the commit (names, or the answer lost)
					default:
						partial++
					}
					continue
				}
				ok++
				if n != 20 {
					missing++
					if missing <= 5 {
						t.Errorf("batch %d of writer %d returned nil but has %d span rows, want 20", res.k, res.w, n)
					}
				}
			}
			t.Logf("%s: %d termination rounds ended %d backends (%d rounds refused while restarting); restart downtime %v; "+
				"%d batches of 20 spans: %d returned nil (%d spans), all stored: %v; %d returned an error (%d of them stored whole, %d partly); %+v",
				drv, killer.rounds.Load(), killer.backends.Load(), killer.failed.Load(), downtime.Round(time.Millisecond),
				len(results), ok, 20*ok, missing == 0, failed, failedStored, partial, s.Stats())
			if missing > 0 || partial > 0 {
				t.Errorf("%d batches that returned nil are not stored as written; %d failed batches stored in part", missing, partial)
			}
			if killer.backends.Load() == 0 {
				t.Error("the terminations ended no backend: the test did not disturb the store")
			}
		})
	}
}
