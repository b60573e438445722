package pool_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// sessionState is what a borrower sees of its session.
type sessionState struct {
	ID         int64
	InTx       int
	Autocommit int
	DB         sql.NullString
	Isolation  string
	ReadOnly   int
}

func readSession(t *testing.T, ctx context.Context, c *sql.Conn) sessionState {
	t.Helper()
	var s sessionState
	err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID(), @@in_transaction, @@autocommit, DATABASE(), @@tx_isolation, @@tx_read_only").
		Scan(&s.ID, &s.InTx, &s.Autocommit, &s.DB, &s.Isolation, &s.ReadOnly)
	if err != nil {
		t.Fatalf("reading the session: %v", err)
	}
	return s
}

// Invariant 2 on MariaDB: whatever a borrower leaves behind, an observer on another connection
// sees no row and no lock after the return, and the next borrower of the same physical
// connection sees the baseline session.
func TestReleaseLeavesNothingBehind(t *testing.T) {
	mysqltest.RequireMariaDB(t, "needs InnoDB transactions, LOCK TABLES, GET_LOCK and @@in_transaction")
	dsn := mysqltest.DSN(t)
	ctx := context.Background()

	observer, err := sql.Open("mysql", withParams(t, dsn, map[string]string{"innodb_lock_wait_timeout": "1", "lock_wait_timeout": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	defer observer.Close()
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS sqlpool_other",
		"CREATE TABLE IF NOT EXISTS sess_t (id INT PRIMARY KEY) ENGINE=InnoDB",
	} {
		if _, err := observer.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	cases := []struct {
		name  string
		stmts []string
		// wantErr is an error number one of the statements must fail with (0: none).
		wantErr uint16
		// before runs on the observer before the borrower (e.g. to hold a row lock); its
		// transaction is rolled back after the borrower returns.
		before []string
	}{
		{name: "BEGIN then INSERT", stmts: []string{"BEGIN", "INSERT INTO sess_t VALUES (1)"}},
		{name: "START TRANSACTION without a statement", stmts: []string{"START TRANSACTION"}},
		{name: "SET autocommit=0 then INSERT", stmts: []string{"SET autocommit=0", "INSERT INTO sess_t VALUES (2)"}},
		{name: "LOCK TABLES", stmts: []string{"LOCK TABLES sess_t WRITE"}},
		{name: "GET_LOCK", stmts: []string{"SELECT GET_LOCK('sqlpool_sess_lock', 0)"}},
		{name: "USE another database", stmts: []string{"USE sqlpool_other"}},
		{name: "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE", stmts: []string{"SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE"}},
		{name: "temporary table", stmts: []string{"CREATE TEMPORARY TABLE sess_tmp (id INT)", "INSERT INTO sess_tmp VALUES (1)"}},
		{
			name:    "lock wait timeout inside a transaction",
			before:  []string{"INSERT INTO sess_t VALUES (5)", "BEGIN", "SELECT id FROM sess_t WHERE id = 5 FOR UPDATE"},
			stmts:   []string{"BEGIN", "INSERT INTO sess_t VALUES (6)", "UPDATE sess_t SET id = 7 WHERE id = 5"},
			wantErr: 1205, // the statement is rolled back, the transaction stays open
		},
	}
	for _, tc := range cases {
		t.Run("OpenDB/"+tc.name, func(t *testing.T) {
			for _, q := range []string{"DELETE FROM sess_t"} {
				if _, err := observer.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			p := newMySQLPool(t, withParams(t, dsn, map[string]string{"innodb_lock_wait_timeout": "1"}),
				pool.Config{MaxConns: 1})
			db := p.OpenDB()
			defer db.Close()

			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			baseline := readSession(t, ctx, c)

			var holder *sql.Conn
			if len(tc.before) > 0 {
				if holder, err = observer.Conn(ctx); err != nil {
					t.Fatal(err)
				}
				defer holder.Close()
				for _, q := range tc.before {
					if _, err := holder.ExecContext(ctx, q); err != nil {
						t.Fatalf("observer %s: %v", q, err)
					}
				}
			}
			sawErr := false
			for _, q := range tc.stmts {
				_, err := c.ExecContext(ctx, q)
				var me *mysql.MySQLError
				switch {
				case err == nil:
				case tc.wantErr != 0 && errors.As(err, &me) && me.Number == tc.wantErr:
					sawErr = true
				default:
					t.Fatalf("%s: %v", q, err)
				}
			}
			if tc.wantErr != 0 && !sawErr {
				t.Fatalf("no statement failed with %d", tc.wantErr)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if holder != nil {
				if _, err := holder.ExecContext(ctx, "ROLLBACK"); err != nil {
					t.Fatal(err)
				}
			}

			// The observer sees no row and no lock.
			var n int
			if err := observer.QueryRowContext(ctx, "SELECT COUNT(*) FROM sess_t WHERE id IN (1, 2, 6, 7)").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("observer sees %d rows the borrower did not commit", n)
			}
			if _, err := observer.ExecContext(ctx, "INSERT INTO sess_t VALUES (99)"); err != nil {
				t.Errorf("observer cannot write the table after the return (lock left behind?): %v", err)
			}
			var free int
			if err := observer.QueryRowContext(ctx, "SELECT IS_FREE_LOCK('sqlpool_sess_lock')").Scan(&free); err != nil || free != 1 {
				t.Errorf("user lock still held after the return: IS_FREE_LOCK=%d, %v", free, err)
			}

			// The next borrower gets the same physical connection, reset to the baseline.
			c2, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c2.Close()
			got := readSession(t, ctx, c2)
			if got != baseline {
				t.Errorf("next borrower sees %+v; want the baseline %+v", got, baseline)
			}
			var x int
			err = c2.QueryRowContext(ctx, "SELECT COUNT(*) FROM sess_tmp").Scan(&x)
			if err == nil {
				t.Errorf("the next borrower sees the temporary table sess_tmp")
			}
			if s := p.Stats(); s.Closed != 0 {
				t.Errorf("the connection was discarded (%+v); every case here has a reset plan", s)
			}
		})
	}
}

// withParams adds session variables to a go-sql-driver/mysql DSN.
func withParams(t testing.TB, dsn string, params map[string]string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	for k, v := range params {
		cfg.Params[k] = v
	}
	return cfg.FormatDSN()
}

// With the statement cache, a repeated parameterized query and a sql.Stmt used through
// p.OpenDB() prepare once per connection; without it, every query prepares, executes and
// closes. Counted in client packets through the byte-counting proxy.
func TestStatementCacheRoundTrips(t *testing.T) {
	dsn := mysqltest.DSN(t)
	cfg, _ := mysql.ParseDSN(dsn)
	ctx := context.Background()
	const n = 50
	run := func(cacheSize int) (packets int64, stats pool.Stats) {
		proxy := mysqltest.NewProxy(t, cfg.Addr)
		p := newMySQLPool(t, proxy.DSN(dsn), pool.Config{MaxConns: 1, StatementCacheSize: cacheSize})
		db := p.OpenDB()
		defer db.Close()
		var v int
		if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&v); err != nil { // warm up
			t.Fatal(err)
		}
		proxy.Reset()
		for i := 0; i < n; i++ {
			if err := db.QueryRowContext(ctx, "SELECT ? + 1", i).Scan(&v); err != nil || v != i+1 {
				t.Fatalf("query %d: %d, %v", i, v, err)
			}
		}
		st, err := db.PrepareContext(ctx, "SELECT ? + 2")
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < n; i++ {
			if err := st.QueryRowContext(ctx, i).Scan(&v); err != nil || v != i+2 {
				t.Fatalf("stmt %d: %d, %v", i, v, err)
			}
		}
		_ = st.Close()
		return proxy.Counts().ClientPackets, p.Stats()
	}
	cached, _ := run(0)
	uncached, _ := run(-1)
	// Cached: one prepare per distinct statement plus one execute per use.
	if want := int64(2 + 2*n); cached > want {
		t.Errorf("with the cache, %d queries and %d statement uses sent %d packets; want at most %d", n, n, cached, want)
	}
	// Uncached: prepare, execute and close for each parameterized query; a prepare per borrow
	// for the sql.Stmt.
	if uncached < int64(4*n) {
		t.Errorf("without the cache only %d packets; the comparison is broken", uncached)
	}
	t.Logf("client packets for %d parameterized queries + %d sql.Stmt uses: cached %d, uncached %d", n, n, cached, uncached)
}

// A statement a borrower leaves open through the driver interface is closed on release and
// counted.
func TestLeakedStatementClosedOnRelease(t *testing.T) {
	dsn := mysqltest.DSN(t)
	p := newMySQLPool(t, dsn, pool.Config{MaxConns: 1, StatementCacheSize: -1})
	ctx := context.Background()
	dc, err := p.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Prepare("SELECT 1"); err != nil {
		t.Fatal(err)
	}
	_ = dc.Close()
	if got := p.Stats().LeakedStatements; got != 1 {
		t.Fatalf("LeakedStatements = %d; want 1", got)
	}
	if !strings.Contains(fmt.Sprint(p.Stats()), "pool") {
		t.Fatal("Stats has no String")
	}
}

// TestStatementCacheCost measures what a cached statement costs the server, the figure behind
// DefaultStatementCacheSize (ARCHITECTURE.md): session memory and prepared statement count
// for a connection whose cache is full. It logs; it asserts only that the cache stays bounded.
func TestStatementCacheCost(t *testing.T) {
	mysqltest.RequireMariaDB(t, "reads MariaDB's session Memory_used and Com_stmt_prepare/Com_stmt_close")
	dsn := mysqltest.DSN(t)
	ctx := context.Background()
	p := newMySQLPool(t, dsn, pool.Config{MaxConns: 1})
	db := p.OpenDB()
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	status := func(name string) int64 {
		var k string
		var v int64
		if err := c.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE '"+name+"'").Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	mem0, stmts0, closes0 := status("Memory_used"), status("Com_stmt_prepare"), status("Com_stmt_close")
	const n = 3 * pool.DefaultStatementCacheSize
	for i := 0; i < n; i++ {
		// Distinct texts, each with a parameter: the cache's case (ErrSkip → cached statement).
		q := fmt.Sprintf("SELECT ? + %d FROM DUAL WHERE 1 = 1", i)
		var v int
		if err := c.QueryRowContext(ctx, q, 1).Scan(&v); err != nil {
			t.Fatal(err)
		}
	}
	mem1, stmts1, closes1 := status("Memory_used"), status("Com_stmt_prepare"), status("Com_stmt_close")
	// Statements this session holds: its own prepares minus its own closes. (The global
	// Prepared_stmt_count counts every other test's statements on the shared server too.)
	open := (stmts1 - stmts0) - (closes1 - closes0)
	if open > int64(pool.DefaultStatementCacheSize)+8 {
		t.Errorf("%d statements prepared on the server after %d distinct queries; the cache should hold at most %d",
			open, n, pool.DefaultStatementCacheSize)
	}
	t.Logf("%d distinct parameterized queries: %d prepares, %d statements held by the full cache, session memory +%d KiB (%.1f KiB per held statement)",
		n, stmts1-stmts0, open, (mem1-mem0)/1024, float64(mem1-mem0)/1024/float64(max(open, 1)))
}
