// Package unregistered_test checks what pool.New does with PostgreSQL's connectors when package
// pgdialect is not linked: this test binary links pgx and lib/pq (and mysqldialect, which
// serves every connector no other dialect is registered for) but not pgdialect.
package unregistered_test

import (
	"database/sql/driver"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/lib/pq"

	_ "github.com/sqlpool/sqlpool/mysqldialect" // registered for every other connector
	"github.com/sqlpool/sqlpool/pool"
)

// TestChooseDialectPostgresUnregistered: New refuses PostgreSQL connectors with an error naming
// pgdialect instead of applying MySQL's rules.
func TestChooseDialectPostgresUnregistered(t *testing.T) {
	pc, err := pq.NewConnector("host=127.0.0.1 port=1")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := pgx.ParseConfig("postgres://127.0.0.1:1/x")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]driver.Connector{"lib/pq": pc, "pgx stdlib": stdlib.GetConnector(*cc)} {
		p, err := pool.New(c, pool.Config{InitializationFailTimeout: -1})
		if err == nil {
			p.Close()
			t.Errorf("%s: New succeeded without a PostgreSQL dialect", name)
			continue
		}
		if !strings.Contains(err.Error(), "pgdialect") {
			t.Errorf("%s: New = %v; want an error naming pgdialect", name, err)
		}
	}
}
