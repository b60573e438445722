package pgdialect_test

import (
	"context"
	"crypto/rand"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/internal/pgtest"
	"github.com/sqlpool/sqlpool/pgdialect"
	"github.com/sqlpool/sqlpool/pool"
)

// TestUnwrapForCopy counts what a COPY on the connection sql.Conn.Raw lends costs at release:
// through pool.Unwrap (session unknown) one release plan per batch, through
// pgdialect.UnwrapFor naming BEGIN, COPY and COMMIT none, on the same kept connection; a
// statement named there that changes the session (SET) is reset at release as if run through
// database/sql.
func TestUnwrapForCopy(t *testing.T) {
	s := pgtest.Shared(t)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(stdlib.GetConnector(*cfg), pool.Config{MaxConns: 1, MinIdleConns: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	db := p.OpenDB()
	defer func() { db.Close(); p.Close() }()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	table := "copy_" + hex.EncodeToString(rnd[:])
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+" (a int8, b text)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+table) })
	copySQL := fmt.Sprintf(`COPY "%s" ( "a", "b" ) FROM STDIN BINARY`, table)
	rows := [][]any{{int64(1), "x"}, {int64(2), "y"}}
	batch := func(unwrap func(dc any) driver.Conn) {
		t.Helper()
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		err = c.Raw(func(dc any) error {
			pc := unwrap(dc).(*stdlib.Conn).Conn()
			if _, err := pc.Exec(ctx, "BEGIN"); err != nil {
				return err
			}
			if _, err := pc.CopyFrom(ctx, pgx.Identifier{table}, []string{"a", "b"}, pgx.CopyFromRows(rows)); err != nil {
				return err
			}
			_, err := pc.Exec(ctx, "COMMIT")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	const batches = 5
	measure := func(name string, unwrap func(dc any) driver.Conn) uint64 {
		t.Helper()
		batch(unwrap) // the first COPY prepares pgx's description of the table
		before := p.Stats()
		for range batches {
			batch(unwrap)
		}
		after := p.Stats()
		if after.Created != before.Created {
			t.Errorf("%s: %d connections opened, want the kept one", name, after.Created-before.Created)
		}
		plans := after.ReleasePlans - before.ReleasePlans
		t.Logf("%s: %d COPY batches, %d release plans", name, batches, plans)
		return plans
	}
	if n := measure("pool.Unwrap", pool.Unwrap); n != batches {
		t.Errorf("pool.Unwrap: %d release plans, want %d (one reset per batch)", n, batches)
	}
	if n := measure("pgdialect.UnwrapFor", func(dc any) driver.Conn { return pgdialect.UnwrapFor(dc, "BEGIN", copySQL, "COMMIT") }); n != 0 {
		t.Errorf("pgdialect.UnwrapFor: %d release plans, want 0", n)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 2*2*(batches+1) {
		t.Fatalf("%s holds %d rows (%v), want %d", table, n, err, 2*2*(batches+1))
	}

	// A named SET is reset at release; the next borrower gets the default search_path.
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := p.Stats().ReleasePlans
	err = c.Raw(func(dc any) error {
		const set = "SET search_path TO pg_catalog"
		_, err := pgdialect.UnwrapFor(dc, set).(*stdlib.Conn).Conn().Exec(ctx, set)
		return err
	})
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	var path string
	if err := db.QueryRowContext(ctx, "SHOW search_path").Scan(&path); err != nil || path != `"$user", public` {
		t.Errorf("search_path after a named SET = %q (%v), want the default", path, err)
	}
	if got := p.Stats().ReleasePlans - before; got != 1 {
		t.Errorf("a named SET: %d release plans, want 1", got)
	}
	// On a driver's own connection it is pool.Unwrap.
	dc, err := stdlib.GetConnector(*cfg).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if got := pgdialect.UnwrapFor(dc, "SELECT 1"); got != dc {
		t.Errorf("UnwrapFor(a driver connection) = %v, want it back", got)
	}
}
