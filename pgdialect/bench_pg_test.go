package pgdialect_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/pool"
)

// BenchmarkStatementCache measures what the pool's statement cache adds on PostgreSQL, one
// goroutine, with pgx stdlib (which keeps its own per-connection statement cache) and lib/pq
// (none): a parameterized query (db.QueryRow with an argument: both drivers run it without
// database/sql's Prepare, so the pool's cache is not involved) and prepare-query-close per
// operation (db.Prepare per request), for plain database/sql, the pool with its cache
// (StatementCacheSize 64) and without it (-1).
func BenchmarkStatementCache(b *testing.B) {
	s := pgtest.Shared(b)
	ctx := context.Background()
	for _, d := range drivers {
		for _, mode := range []string{"plain", "pool", "pool-nocache"} {
			var db *sql.DB
			switch mode {
			case "plain":
				db = sql.OpenDB(d.conn(b, s))
				db.SetMaxOpenConns(1)
			default:
				size := 0
				if mode == "pool-nocache" {
					size = -1
				}
				p, err := pool.New(d.conn(b, s), pool.Config{MaxConns: 1, StatementCacheSize: size})
				if err != nil {
					b.Fatal(err)
				}
				db = p.OpenDB()
				defer p.Close()
			}
			defer db.Close()
			b.Run(d.name+"/"+mode+"/param-query", func(b *testing.B) {
				var n int
				for i := 0; b.Loop(); i++ {
					if err := db.QueryRowContext(ctx, "SELECT $1::int + 1", i).Scan(&n); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(d.name+"/"+mode+"/prepare-query-close", func(b *testing.B) {
				var n int
				for i := 0; b.Loop(); i++ {
					st, err := db.PrepareContext(ctx, "SELECT $1::int + 2")
					if err != nil {
						b.Fatal(err)
					}
					if err := st.QueryRowContext(ctx, i).Scan(&n); err != nil {
						b.Fatal(err)
					}
					st.Close()
				}
			})
		}
	}
}

// TestStatementCacheBytes counts, through a proxy, the bytes a client sends per operation (a
// deterministic stand-in for round trips, unlike timings on a shared machine): the pool's
// statement cache must make db.Prepare-per-request cheaper than plain database/sql and than the
// pool without the cache, with both drivers, cost nothing for a parameterized query with pgx
// (its own cache), and make a repeated one cheaper with lib/pq.
func TestStatementCacheBytes(t *testing.T) {
	s := pgtest.Shared(t)
	ctx := context.Background()
	const ops = 50
	for _, d := range drivers {
		got := map[string]int64{}
		for _, mode := range []string{"plain", "pool", "pool-nocache"} {
			px := mysqltest.NewProxy(t, s.Addr())
			c := d.conn(t, s.Via(px.Addr()))
			var db *sql.DB
			switch mode {
			case "plain":
				db = sql.OpenDB(c)
				db.SetMaxOpenConns(1)
			default:
				size := 0
				if mode == "pool-nocache" {
					size = -1
				}
				db = newPool(t, c, pool.Config{MaxConns: 1, StatementCacheSize: size}).OpenDB()
			}
			run := func(name string, op func(i int) error) {
				if err := op(0); err != nil { // warm: connection open, first prepare
					t.Fatal(err)
				}
				px.Reset()
				for i := range ops {
					if err := op(i); err != nil {
						t.Fatalf("%s %s %s: %v", d.name, mode, name, err)
					}
				}
				got[mode+"/"+name] = px.Counts().ClientBytes / ops
			}
			var n int
			run("param-query", func(i int) error { return db.QueryRowContext(ctx, "SELECT $1::int + 1", i).Scan(&n) })
			run("prepare-query-close", func(i int) error {
				st, err := db.PrepareContext(ctx, "SELECT $1::int + 2")
				if err != nil {
					return err
				}
				defer st.Close()
				return st.QueryRowContext(ctx, i).Scan(&n)
			})
			db.Close()
		}
		t.Logf("%s: client bytes per operation: %v", d.name, got)
		if got["pool/prepare-query-close"] >= got["plain/prepare-query-close"] || got["pool/prepare-query-close"] >= got["pool-nocache/prepare-query-close"] {
			t.Errorf("%s: the cache does not make prepare-per-request cheaper: %v", d.name, got)
		}
		if got["pool/param-query"] > got["plain/param-query"] {
			t.Errorf("%s: the pool sends more for a parameterized query than plain database/sql: %v", d.name, got)
		}
		// lib/pq parses a parameterized query anew each time; the pool's cache binds and
		// executes a repeated one (pool.SessionCaps.CacheFirst).
		if d.name == "pq" && got["pool/param-query"] >= got["plain/param-query"] {
			t.Errorf("pq: a repeated parameterized query through the pool's cache sends no less than plain database/sql: %v", got)
		}
	}
}

// BenchmarkCycleConn is db.Conn + Close on one goroutine (jmh's cycleConnection), for plain
// database/sql and the pool through p.OpenDB(), with both drivers: a clean borrow and return,
// which sends nothing.
func BenchmarkCycleConn(b *testing.B) {
	s := pgtest.Shared(b)
	ctx := context.Background()
	for _, d := range drivers {
		for _, mode := range []string{"plain", "pool"} {
			var db *sql.DB
			if mode == "plain" {
				db = sql.OpenDB(d.conn(b, s))
				db.SetMaxOpenConns(8)
				db.SetMaxIdleConns(8)
			} else {
				p, err := pool.New(d.conn(b, s), pool.Config{MaxConns: 8})
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				db = p.OpenDB()
			}
			defer db.Close()
			b.Run(d.name+"/"+mode, func(b *testing.B) {
				for b.Loop() {
					c, err := db.Conn(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if err := c.Close(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
