package pgdialect_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/pgdialect"
	"github.com/sqlpool/sqlpool/pool"
)

// holdAll borrows n connections at once and returns them, so that n are pooled.
func holdAll(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	ctx := context.Background()
	var cs []*sql.Conn
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.PingContext(ctx); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	for _, c := range cs {
		c.Close()
	}
}

func waitBackendsGone(t *testing.T, admin *sql.DB, app string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := admin.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends of %s still there 10 s after pg_terminate_backend", n, app)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTerminateEveryPooledBackendIsInvisible: ten rounds of: pool 4 connections, terminate
// every one of their backends on the server (pg_terminate_backend), run 8 queries one after
// another and 8 at once: none fails, with both drivers, inside a bypass window of an hour (so
// no probe runs: the pool's socket check sees the FATAL the server sent).
func TestTerminateEveryPooledBackendIsInvisible(t *testing.T) {
	s := pgtest.Shared(t)
	admin := s.Admin(t)
	ctx := context.Background()
	const size, rounds = 4, 10
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			app := "sqlpool_term_" + d.name
			var c driver.Connector
			if d.name == "pgx" {
				c = s.PgxConnector(t, "application_name="+app)
			} else {
				c = s.PqConnector(t, "application_name="+app)
			}
			p := newPool(t, c, pool.Config{MaxConns: size, AliveBypassWindow: time.Hour})
			db := p.OpenDB()
			defer db.Close()
			var failed atomic.Int32
			for r := range rounds {
				holdAll(t, db, size)
				var n int
				if err := admin.QueryRow("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n != size {
					t.Fatalf("round %d: terminated %d backends, want %d", r, n, size)
				}
				waitBackendsGone(t, admin, app)
				for range 8 {
					var v int
					if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&v); err != nil {
						failed.Add(1)
						t.Errorf("round %d: sequential query: %v", r, err)
					}
				}
				holdAll(t, db, size)
				if err := admin.QueryRow("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
					t.Fatal(err)
				}
				waitBackendsGone(t, admin, app)
				var wg sync.WaitGroup
				for range 8 {
					wg.Go(func() {
						var v int
						if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&v); err != nil {
							failed.Add(1)
							t.Errorf("round %d: concurrent query: %v", r, err)
						}
					})
				}
				wg.Wait()
			}
			if f := failed.Load(); f != 0 {
				t.Errorf("%d of %d queries failed after pg_terminate_backend", f, rounds*16)
			}
		})
	}
}

// TestRestartUnder16Goroutines: 16 goroutines query without pause while the server restarts
// (fast shutdown, start on the same port); every query that starts after the server is back
// succeeds, with both drivers.
func TestRestartUnder16Goroutines(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a server")
	}
	s := pgtest.Start(t)
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			p := newPool(t, d.conn(t, s), pool.Config{MaxConns: 8, ConnectTimeout: 5 * time.Second})
			db := p.OpenDB()
			defer db.Close()
			var back atomic.Bool
			var during, after, ok atomic.Int64
			var firstAfter atomic.Value
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						started := back.Load()
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						var v int
						err := db.QueryRowContext(ctx, "SELECT 1").Scan(&v)
						cancel()
						switch {
						case err == nil:
							ok.Add(1)
						case started:
							after.Add(1)
							firstAfter.CompareAndSwap(nil, err.Error())
						default:
							during.Add(1)
						}
					}
				})
			}
			time.Sleep(300 * time.Millisecond) // load before the restart
			s.Restart(t)
			back.Store(true)
			time.Sleep(time.Second) // load after it
			close(stop)
			wg.Wait()
			t.Logf("%d queries ok, %d failed while the server was down, %d failed after it was back", ok.Load(), during.Load(), after.Load())
			if n := after.Load(); n != 0 {
				t.Errorf("%d queries that started after the restart failed; first: %v", n, firstAfter.Load())
			}
		})
	}
}

// TestErrorClassesOnARealServer classifies errors a real server and both drivers produce.
func TestErrorClassesOnARealServer(t *testing.T) {
	s := pgtest.Shared(t)
	s.Exec(t, `CREATE TABLE IF NOT EXISTS sqlpool_lock (id int PRIMARY KEY)`, `INSERT INTO sqlpool_lock VALUES (1) ON CONFLICT DO NOTHING`,
		`DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'sqlpool_nolimit') THEN CREATE ROLE sqlpool_nolimit LOGIN CONNECTION LIMIT 0; END IF; END $$`)
	ctx := context.Background()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			db := sql.OpenDB(d.conn(t, s))
			defer db.Close()
			check := func(name string, err error, readOnly bool, fatal, gone, transient bool) {
				t.Helper()
				if err == nil {
					t.Errorf("%s: no error", name)
					return
				}
				c := pgdialect.Dialect.Classify(err, pool.ErrorContext{ReadOnlyTx: readOnly})
				if c.Fatal != fatal || c.ServerGone != gone || c.Transient != transient {
					t.Errorf("%s: %v classified %+v; want fatal=%v gone=%v transient=%v", name, err, c, fatal, gone, transient)
				}
			}
			for _, code := range []string{"40001", "40P01"} {
				_, err := db.ExecContext(ctx, fmt.Sprintf(`DO $$ BEGIN RAISE EXCEPTION 'test' USING ERRCODE = '%s'; END $$`, code))
				check(code, err, false, false, false, true)
				if !pgdialect.Transient(err) || pgdialect.AmbiguousCommit(err) {
					t.Errorf("%s: Transient %v AmbiguousCommit %v", code, pgdialect.Transient(err), pgdialect.AmbiguousCommit(err))
				}
			}
			// 55P03: a row lock held elsewhere, NOWAIT.
			holder, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := holder.ExecContext(ctx, "SELECT id FROM sqlpool_lock WHERE id = 1 FOR UPDATE"); err != nil {
				t.Fatal(err)
			}
			_, err = db.ExecContext(ctx, "SELECT id FROM sqlpool_lock WHERE id = 1 FOR UPDATE NOWAIT")
			check("55P03 NOWAIT", err, false, false, false, true)
			_ = holder.Rollback()
			// 25006 in the borrower's own read-only transaction: not fatal.
			tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tx.ExecContext(ctx, "INSERT INTO sqlpool_lock VALUES (2)")
			check("25006 own read-only tx", err, true, false, false, false)
			_ = tx.Rollback()
			// 25006 without it (default_transaction_read_only, as on a standby): fatal, gone.
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.ExecContext(ctx, "SET default_transaction_read_only = on"); err != nil {
				t.Fatal(err)
			}
			_, err = c.ExecContext(ctx, "INSERT INTO sqlpool_lock VALUES (3)")
			check("25006 read-only server", err, false, true, true, false)
			_ = c.Raw(func(any) error { return driver.ErrBadConn }) // drop it
			c.Close()
			// 57P01: pg_terminate_backend of a busy backend.
			c, err = db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var pid int
			if err := c.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatal(err)
			}
			errc := make(chan error, 1)
			go func() {
				_, err := c.ExecContext(ctx, "SELECT pg_sleep(30)")
				errc <- err
			}()
			admin := s.Admin(t)
			deadline := time.Now().Add(10 * time.Second)
			for {
				var n int
				if err := admin.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state = 'active'", pid).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 1 || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if _, err := admin.Exec("SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
			err = <-errc
			// lib/pq turns a FATAL error into driver.ErrBadConn (losing 57P01): fatal, not gone.
			check("57P01 busy", err, false, true, d.name == "pgx", false)
			if !pgdialect.AmbiguousCommit(err) {
				t.Errorf("a terminated connection must make a COMMIT ambiguous")
			}
			c.Close()
			// 53300 at connect: a role whose connection limit is 0.
			var lc driver.Connector
			url := s.DSN()
			if d.name == "pgx" {
				lc = s.Via(s.Addr()).PgxConnector(t, "user=sqlpool_nolimit")
			} else {
				lc = s.PqConnector(t, "user=sqlpool_nolimit")
			}
			_ = url
			_, err = lc.Connect(ctx)
			check("53300 connection limit", err, false, true, false, false)
			if errors.Is(err, context.Canceled) {
				t.Fatal("unexpected")
			}
		})
	}
}
