package metrics_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/metrics"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/stmtname"
)

// TestStatementsOnServer runs statements against mysqltest.DSN (the embedded server, or
// MariaDB in CI) through a pool, with database/sql in front both ways (p.OpenDB() and
// sql.OpenDB(p)), and checks their names, counts and error classes as the server reports them.
func TestStatementsOnServer(t *testing.T) {
	cfg, err := mysql.ParseDSN(mysqltest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, way := range []string{"OpenDB", "sql.OpenDB"} {
		t.Run(way, func(t *testing.T) {
			m := newMetrics(t, metrics.Options{})
			p, err := pool.New(connector, pool.Config{Name: "srv", MaxConns: 2, Trace: m.Trace(), Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			m.MustRegister(p)
			var db *sql.DB
			if way == "OpenDB" {
				db = p.OpenDB()
			} else {
				db = sql.OpenDB(p) // closing it closes the pool; the deferred p.Close does nothing
			}
			defer db.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			table := fmt.Sprintf("metrics_t_%d", rand.Uint32())
			mustExec := func(q string, args ...any) {
				t.Helper()
				if _, err := db.ExecContext(ctx, q, args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			mustExec("CREATE TABLE " + table + " (id INT PRIMARY KEY, name VARCHAR(20))")
			defer func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+table) }()
			mustExec("INSERT INTO "+table+" (id, name) VALUES (?, ?)", 1, "a")
			if _, err := db.ExecContext(ctx, "INSERT INTO "+table+" (id, name) VALUES (?, ?)", 1, "b"); err == nil {
				t.Fatal("duplicate insert succeeded")
			}
			if _, err := db.ExecContext(ctx, "SELEC 1"); err == nil {
				t.Fatal("syntax error accepted")
			}
			var name string
			for i := 0; i < 3; i++ {
				if err := db.QueryRowContext(stmtname.With(ctx, "get_name"), "SELECT name FROM "+table+" WHERE id = ?", 1).Scan(&name); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.ExecContext(ctx, "UPDATE "+table+" SET name = 'c' WHERE id = 1"); err != nil {
				t.Fatal(err)
			}

			// MariaDB answers 1064 (ER_PARSE_ERROR); the embedded server another number.
			syntaxErr := map[string]uint64{"syntax": 1}
			if !mysqltest.IsMariaDB() {
				syntaxErr = map[string]uint64{"other": 1}
			}
			got := map[string]metrics.StatementSnapshot{}
			for _, s := range m.Snapshot().Statements {
				got[s.Name] = s
			}
			want := []struct {
				name   string
				count  uint64
				errors map[string]uint64
			}{
				{"create", 1, nil},
				{"insert " + table, 2, map[string]uint64{"duplicate": 1}},
				{"other", 1, syntaxErr}, // SELEC is no verb
				{"get_name", 3, nil},
				{"update " + table, 1, nil},
			}
			for _, w := range want {
				s, ok := got[w.name]
				if !ok {
					t.Errorf("no statement %q in %v", w.name, keys(got))
					continue
				}
				if s.Count != w.count || fmt.Sprint(s.Errors) != fmt.Sprint(w.errors) {
					t.Errorf("%s: count %d errors %v; want %d %v", w.name, s.Count, s.Errors, w.count, w.errors)
				}
				if s.SumSeconds <= 0 {
					t.Errorf("%s: no time recorded", w.name)
				}
			}
			ps := m.Snapshot().Pools[0]
			if ps.Acquire.Count == 0 || ps.Usage.Count == 0 || ps.Creation.Count == 0 || ps.Creation.SumSeconds <= 0 {
				t.Errorf("pool timers: %+v", ps)
			}
		})
	}
}

func keys(m map[string]metrics.StatementSnapshot) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
