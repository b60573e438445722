package pgstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/lib/pq"
	"go.uber.org/goleak"

	"github.com/sqlpool/sqlpool/internal/pgtest"
	_ "github.com/sqlpool/sqlpool/pgdialect" // the pool's PostgreSQL rules
)

func TestMain(m *testing.M) {
	code := pgtest.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// server is one PostgreSQL database reached through one driver.
type server struct {
	name string // the driver: "pgx" or "pq"
	dsn  string // a postgres:// URL
}

func (s server) connector(t testing.TB) driver.Connector {
	t.Helper()
	if s.name == "pq" {
		c, err := pq.NewConnector(s.dsn)
		if err != nil {
			t.Fatalf("pq.NewConnector: %v", err)
		}
		return c
	}
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		t.Fatalf("pgx.ParseConfig: %v", err)
	}
	return stdlib.GetConnector(*cfg)
}

// forEachServer runs f as a subtest per driver on the test binary's shared
// PostgreSQL (PG_TEST_DSN's, or one started here); without PostgreSQL it
// skips (fails with SQLPOOL_REQUIRE_POSTGRES=1).
func forEachServer(t *testing.T, f func(t *testing.T, srv server)) {
	t.Helper()
	pg := pgtest.Shared(t)
	for _, name := range []string{"pgx", "pq"} {
		t.Run(name, func(t *testing.T) { f(t, server{name: name, dsn: pg.DSN()}) })
	}
}

// pgServerDSN is the shared server's URL (it skips without PostgreSQL).
func pgServerDSN(t *testing.T) string { return pgtest.Shared(t).DSN() }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// freshSchema creates a schema of the test's own (zipkin_<random>), drops
// it at cleanup, and returns srv with a DSN whose search_path selects it.
func freshSchema(t testing.TB, srv server) server {
	t.Helper()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	name := "zipkin_" + hex.EncodeToString(rnd[:])
	admin := sql.OpenDB(server{name: "pgx", dsn: srv.dsn}.connector(t))
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP SCHEMA IF EXISTS "+name+" CASCADE"); err != nil {
			t.Logf("DROP SCHEMA %s: %v", name, err)
		}
		admin.Close()
	})
	if _, err := admin.ExecContext(ctxT(t), "CREATE SCHEMA "+name); err != nil {
		t.Fatalf("CREATE SCHEMA %s: %v", name, err)
	}
	u, err := url.Parse(srv.dsn)
	if err != nil {
		t.Fatalf("parsing %s: %v", srv.dsn, err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	srv.dsn = u.String()
	return srv
}
