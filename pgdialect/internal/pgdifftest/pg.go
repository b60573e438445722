// Package pgdifftest is the differential fuzzer on PostgreSQL: the same idea as
// internal/difftest's Runner (one random program through plain database/sql, a fresh physical
// connection per borrow, and through p.OpenDB() with MaxConns 1 and package pgdialect), with
// PostgreSQL's statements and session view. It lives in the pgdialect module so that the
// library module requires no PostgreSQL driver; the program vocabulary (Step, Program, the Op
// constants) is internal/difftest's, dot-imported.
package pgdifftest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/lib/pq"

	. "github.com/sqlpool/sqlpool/internal/difftest" //nolint:revive // the shared program vocabulary
	"github.com/sqlpool/sqlpool/pgdialect"
	"github.com/sqlpool/sqlpool/pool"
)

// execer is what a step runs on: the borrowed *sql.Conn or its open *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func ex(q string, args ...any) []Step     { return []Step{{Op: OpExec, SQL: q, Args: args}} }
func qu(q string, args ...any) []Step     { return []Step{{Op: OpQuery, SQL: q, Args: args}} }
func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// PGOptions configure a PostgreSQL run.
type PGOptions struct {
	// Connector returns a connector (pgx stdlib or lib/pq) for database db as a superuser.
	Connector func(db string) (driver.Connector, error)
	// Admin runs setup statements (CREATE DATABASE …) on another database of the server.
	Admin *sql.DB
	// Prefix names the run's databases <Prefix>_r and <Prefix>_p. Zero value: "difftest_pg".
	Prefix string
	// StepTimeout bounds one step. Zero value: 10 s.
	StepTimeout time.Duration
	// Dialect is the pool's dialect. Zero value: pgdialect.Dialect. A broken one proves the
	// fuzzer finds what it misses.
	Dialect pool.Dialect
}

// PGRunner runs programs on one PostgreSQL server. It is not safe for concurrent use.
type PGRunner struct{ o PGOptions }

// NewPGRunner returns a runner; it creates the roles the programs use.
func NewPGRunner(o PGOptions) (*PGRunner, error) {
	if o.Prefix == "" {
		o.Prefix = "difftest_pg"
	}
	if o.StepTimeout == 0 {
		o.StepTimeout = 10 * time.Second
	}
	if o.Dialect == nil {
		o.Dialect = pgdialect.Dialect
	}
	_, err := o.Admin.Exec(`DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'difftest_r1') THEN CREATE ROLE difftest_r1; END IF; END $$`)
	if err != nil {
		return nil, fmt.Errorf("difftest: creating role difftest_r1: %w", err)
	}
	return &PGRunner{o: o}, nil
}

// Close drops the run's databases.
func (r *PGRunner) Close() error {
	for _, s := range []string{"r", "p"} {
		_, _ = r.o.Admin.Exec("DROP DATABASE IF EXISTS " + r.o.Prefix + "_" + s + " WITH (FORCE)")
	}
	return nil
}

func (r *PGRunner) reset(side string) error {
	name := r.o.Prefix + "_" + side
	for _, q := range []string{"DROP DATABASE IF EXISTS " + name + " WITH (FORCE)", "CREATE DATABASE " + name} {
		if _, err := r.o.Admin.Exec(q); err != nil {
			return fmt.Errorf("difftest: %s: %w", q, err)
		}
	}
	c, err := r.o.Connector(name)
	if err != nil {
		return err
	}
	db := sql.OpenDB(c)
	defer db.Close()
	for _, q := range []string{
		"CREATE TABLE t (id serial PRIMARY KEY, v text)",
		"INSERT INTO t (v) VALUES ('a1'), ('a2'), ('a3')",
		"CREATE SCHEMA s1",
		"CREATE TABLE s1.t (id int, v text)",
		"INSERT INTO s1.t VALUES (1, 's1')",
		"GRANT ALL ON ALL TABLES IN SCHEMA public, s1 TO difftest_r1",
		"GRANT USAGE ON SCHEMA s1 TO difftest_r1",
		"CREATE SEQUENCE sq",
		`CREATE FUNCTION sq_curr() RETURNS text LANGUAGE plpgsql AS $$ BEGIN RETURN currval('sq')::text; EXCEPTION WHEN others THEN RETURN 'none'; END $$`,
		// Name resolution: items is public.items (id, v) or, under search_path s2, s2.items
		// (id, v, w); a temporary items (id, v, w, z) shadows both.
		"CREATE TABLE items (id int PRIMARY KEY, v text)",
		"INSERT INTO items VALUES (1, 'p1'), (2, 'p2'), (3, 'p3')",
		"CREATE SCHEMA s2",
		"CREATE TABLE s2.items (id int PRIMARY KEY, v text, w text)",
		"INSERT INTO s2.items VALUES (1, 's1', 'w1'), (2, 's2', 'w2')",
		"GRANT USAGE ON SCHEMA s2 TO difftest_r1",
		"GRANT ALL ON ALL TABLES IN SCHEMA public, s2 TO difftest_r1",
		// Functions that change settings without the statement text naming them.
		`CREATE FUNCTION set_wm() RETURNS text LANGUAGE plpgsql AS $$ BEGIN RETURN set_config('work_mem', '3456kB', false); END $$`,
		`CREATE FUNCTION set_path() RETURNS text LANGUAGE plpgsql AS $$ BEGIN RETURN set_config('search_path', 's2', false); END $$`,
		`CREATE FUNCTION set_tenant(t text) RETURNS text LANGUAGE plpgsql AS $$ BEGIN RETURN set_config('app.tenant', t, false); END $$`,
		`CREATE PROCEDURE proc_wm() LANGUAGE plpgsql AS $$ BEGIN PERFORM set_config('work_mem', '4567kB', false); END $$`,
	} {
		if _, err := db.Exec(q); err != nil {
			return fmt.Errorf("difftest: setup %q: %w", q, err)
		}
	}
	return nil
}

// pgView is what a borrower sees of its session, as one comparable string per key: every
// setting whose source is not the default, with its value and source (a setting left at its
// session start value by a RESET has the same source as on a fresh connection), and custom
// settings told apart from absent ones (NULL) and empty ones.
const pgViewQuery = `SELECT 'settings', coalesce(string_agg(name || '=' || setting || '@' || source, ',' ORDER BY name), '') FROM pg_settings WHERE source NOT IN ('default', 'client', 'command line', 'configuration file', 'environment variable', 'override')
UNION ALL SELECT 'custom', concat_ws('/', coalesce(quote_literal(current_setting('app.x', true)), 'NULL'), coalesce(quote_literal(current_setting('app.y', true)), 'NULL'), coalesce(quote_literal(current_setting('app.tenant', true)), 'NULL'))
UNION ALL SELECT 'users', session_user || '/' || current_user
UNION ALL SELECT 'search_path', current_setting('search_path')
UNION ALL SELECT 'listen', coalesce((SELECT string_agg(c, ',' ORDER BY c) FROM pg_listening_channels() c), '')
UNION ALL SELECT 'advisory', (SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())
UNION ALL SELECT 'temp', (SELECT count(*)::text FROM pg_class WHERE relnamespace = pg_my_temp_schema())
UNION ALL SELECT 'prepared', coalesce((SELECT string_agg(name, ',' ORDER BY name) FROM pg_prepared_statements WHERE from_sql), '')
UNION ALL SELECT 'cursors', (SELECT count(*)::text FROM pg_cursors)
UNION ALL SELECT 'tx', (now() <> statement_timestamp())::text || '/' || coalesce(pg_current_xact_id_if_assigned()::text, '-')
UNION ALL SELECT 'currval', sq_curr()
UNION ALL SELECT 'ro', current_setting('transaction_read_only') || '/' || current_setting('transaction_isolation')`

// pgGens are PostgreSQL's step generators with their weights.
var pgGens = []struct {
	w int
	f func(r *rand.Rand) []Step
}{
	{10, func(r *rand.Rand) []Step {
		return qu(pick(r, "SELECT id, v FROM t ORDER BY id", "SELECT count(*) FROM t", "SELECT v FROM t WHERE id = 2", "SELECT current_user, current_setting('work_mem')"))
	}},
	{6, func(r *rand.Rand) []Step { return qu("SELECT v FROM t WHERE id = $1", int64(r.IntN(5)+1)) }},
	{4, func(r *rand.Rand) []Step { return ex("INSERT INTO t (v) VALUES ($1)", pick(r, "i1", "i2")) }},
	// Parameterized statements that fail in each phase: at parse (a syntax error, an unknown
	// column) and at execution (division by zero, a duplicate key), also on the pool's
	// cache-first path with lib/pq.
	{3, func(r *rand.Rand) []Step { return qu("SELECT * FROM t WHERE id = $1", int64(r.IntN(5)+1)) }},
	{2, func(r *rand.Rand) []Step {
		switch r.IntN(4) {
		case 0:
			return qu("SELEC v FROM t WHERE id = $1", int64(1))
		case 1:
			return qu("SELECT nope FROM t WHERE id = $1", int64(1))
		case 2:
			return ex("UPDATE t SET v = 'z' WHERE id = 1 / $1::int", int64(r.IntN(2)))
		}
		return ex("INSERT INTO t (id, v) VALUES ($1, 'dup')", int64(1))
	}},
	{3, func(r *rand.Rand) []Step { return qu("SELECT id, v FROM t ORDER BY id") }},
	{5, func(r *rand.Rand) []Step {
		return ex(pick(r, "SET work_mem = '1234kB'", "SET statement_timeout = '9s'", "SET SESSION lock_timeout = 3000",
			"SET app.x = 'tenant1'", "SET app.y TO 'y'", "RESET work_mem", "RESET ALL", "SET LOCAL work_mem = '2MB'",
			"SET TIME ZONE 'Asia/Tokyo'", "SET datestyle = 'SQL, DMY'", "SET default_transaction_isolation = 'serializable'"))
	}},
	{3, func(r *rand.Rand) []Step {
		return ex(pick(r, "SET ROLE difftest_r1", "RESET ROLE", "SET SESSION AUTHORIZATION difftest_r1", "RESET SESSION AUTHORIZATION",
			"SELECT set_config('role', 'difftest_r1', false)"))
	}},
	{3, func(r *rand.Rand) []Step {
		return ex(pick(r, "SET search_path TO s1, public", "SET SCHEMA 's1'", "RESET search_path"))
	}},
	{2, func(r *rand.Rand) []Step {
		return ex(pick(r, "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ",
			"SET default_transaction_read_only = on"))
	}},
	{3, func(r *rand.Rand) []Step {
		return ex(pick(r, "LISTEN ch1", "LISTEN ch2", "UNLISTEN ch1", "UNLISTEN *"))
	}},
	{3, func(r *rand.Rand) []Step {
		return qu(pick(r, "SELECT pg_advisory_lock(11)", "SELECT pg_try_advisory_lock(12)", "SELECT pg_advisory_unlock(11)",
			"SELECT pg_advisory_lock_shared(13)", "SELECT pg_advisory_unlock_all()"))
	}},
	{3, func(r *rand.Rand) []Step {
		return ex(pick(r, "CREATE TEMP TABLE tt (a int)", "CREATE TEMPORARY TABLE IF NOT EXISTS tt2 AS SELECT 1 AS a", "DROP TABLE IF EXISTS tt", "DISCARD TEMP",
			"SELECT 1 AS a INTO TEMP tt3"))
	}},
	{2, func(r *rand.Rand) []Step {
		return ex(pick(r, "PREPARE q1 AS SELECT 1", "PREPARE q2 (int) AS SELECT $1", "DEALLOCATE q1", "EXECUTE q1"))
	}},
	// DEALLOCATE ALL and DISCARD ALL also drop the driver's own prepared statements (pgx's
	// statement cache still names them): within the borrow a statement that an earlier borrower
	// left in that cache then fails with 26000 where a new connection would prepare it
	// (docs/postgresql.md), so the borrow ends here and the next borrower must not see it.
	{1, func(r *rand.Rand) []Step {
		return []Step{{Op: OpExec, SQL: pick(r, "DEALLOCATE ALL", "DISCARD ALL")}, {Op: OpBorrow}}
	}},
	{2, func(r *rand.Rand) []Step {
		return []Step{{Op: OpExec, SQL: "BEGIN"}, {Op: OpExec, SQL: "DECLARE c1 CURSOR WITH HOLD FOR SELECT id FROM t"}, {Op: OpExec, SQL: pick(r, "COMMIT", "ROLLBACK")}}
	}},
	{1, func(r *rand.Rand) []Step { return ex(pick(r, "CLOSE ALL", "CLOSE c1")) }},
	{2, func(r *rand.Rand) []Step {
		return qu(pick(r, "SELECT set_config('app.x', 'sc', false)", "SELECT set_config('app.y', 'local', true)", "SELECT nextval('sq')", "SELECT sq_curr()"))
	}},
	{4, func(r *rand.Rand) []Step {
		return ex(pick(r, "BEGIN", "BEGIN ISOLATION LEVEL SERIALIZABLE", "START TRANSACTION READ ONLY", "COMMIT", "ROLLBACK", "SAVEPOINT sp", "ROLLBACK TO SAVEPOINT sp", "END"))
	}},
	{2, func(r *rand.Rand) []Step {
		return ex(pick(r, "SELECT 1/0", "SELECT * FROM missing_table", "INSERT INTO t (id, v) VALUES (1, 'dup')"))
	}},
	{1, func(r *rand.Rand) []Step {
		return ex(pick(r, "DO $$ BEGIN PERFORM set_config('app.x', 'do', false); END $$", "SELECT 1; SET work_mem = '3MB'; LISTEN ch3"))
	}},
	{3, func(r *rand.Rand) []Step {
		return []Step{{Op: OpBeginTx, Iso: pick(r, sql.LevelDefault, sql.LevelSerializable, sql.LevelReadCommitted), ReadOnly: r.IntN(3) == 0}}
	}},
	{2, func(r *rand.Rand) []Step { return []Step{{Op: pick(r, OpCommitTx, OpRollback)}} }},
	{2, func(r *rand.Rand) []Step {
		return []Step{{Op: OpPrepare, Slot: r.IntN(Slots), SQL: pick(r, "SELECT v FROM t WHERE id = $1", "SELECT count(*) + $1 FROM t")}}
	}},
	{3, func(r *rand.Rand) []Step {
		return []Step{{Op: OpStmtQuery, Slot: r.IntN(Slots), Args: []any{int64(r.IntN(4) + 1)}}}
	}},
	// Name resolution across borrows: statements whose result type depends on search_path or
	// on a temporary table that shadows a real one (pgx caches the prepared statement, lib/pq
	// through the pool's statement cache from its second run).
	{8, func(r *rand.Rand) []Step {
		return qu(pick(r, "SELECT * FROM items WHERE id >= $1 ORDER BY id", "SELECT * FROM items WHERE id <= $1 ORDER BY id"), int64(r.IntN(3)+1))
	}},
	{2, func(r *rand.Rand) []Step { return qu("SELECT * FROM items ORDER BY id") }},
	{4, func(r *rand.Rand) []Step {
		return ex(pick(r, "SET search_path TO s2", "SET search_path TO s2, public", "SET search_path TO public", "RESET search_path",
			"SELECT set_config('search_path', 's2', false)", "SET LOCAL search_path TO s2"))
	}},
	{3, func(r *rand.Rand) []Step {
		return ex(pick(r, "CREATE TEMP TABLE items (id int, v text, w text, z text)", "INSERT INTO pg_temp.items VALUES (9, 't9', 'tw', 'tz')",
			"DROP TABLE IF EXISTS pg_temp.items"))
	}},
	// A sql.Stmt prepared on the DB before the first borrow (slot Slots), used through
	// tx.Stmt: a fresh connection prepares it under the borrower's search_path.
	{3, func(r *rand.Rand) []Step {
		return []Step{{Op: OpStmtQuery, Slot: Slots, Args: []any{int64(r.IntN(3) + 1)}}}
	}},
	// Settings changed where the statement text does not name them: DO blocks, functions,
	// procedures, set_config; SET TRANSACTION outside a transaction.
	{3, func(r *rand.Rand) []Step {
		return ex(pick(r, "DO $$BEGIN PERFORM set_config('app.tenant', 'from_do', false); END$$",
			"DO $$BEGIN PERFORM set_config('work_mem', '2345kB', false); END$$",
			"DO $$BEGIN EXECUTE 'SET search_path TO s2'; END$$",
			"DO $$BEGIN PERFORM 1; END$$",
			"SELECT set_wm()", "SELECT set_path()", "SELECT set_tenant('f')", "SELECT length(set_wm())",
			"CALL proc_wm()", "SELECT set_config('app.tenant', 'sc', false)", "SELECT set_config('app.tenant', 'loc', true)",
			"SET app.tenant = 'set'", "RESET app.y"))
	}},
	{3, func(r *rand.Rand) []Step {
		return ex(pick(r, "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", "SET TRANSACTION READ ONLY", "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, DEFERRABLE",
			"SET transaction_isolation = 'repeatable read'", "SET SESSION transaction_read_only = on", "SELECT set_config('transaction_deferrable', 'on', false)"))
	}},
	{12, func(r *rand.Rand) []Step { return []Step{{Op: OpBorrow}} }},
}

// pgDBStmtSQL is the statement prepared on the DB (slot Slots).
const pgDBStmtSQL = "SELECT * FROM items WHERE id >= $1 ORDER BY id"

// GeneratePG returns a PostgreSQL program of n steps from the seed.
func GeneratePG(seed uint64, n int) Program {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	total := 0
	for _, g := range pgGens {
		total += g.w
	}
	p := make(Program, 0, n+3)
	for len(p) < n {
		k := r.IntN(total)
		for _, g := range pgGens {
			if k < g.w {
				p = append(p, g.f(r)...)
				break
			}
			k -= g.w
		}
	}
	return p[:n]
}

type pgSide struct {
	plain bool
	db    *sql.DB
	// admin (the reference side only) watches for the exit of the backend of a closed
	// borrow, pid.
	admin *sql.DB
	pid   int64
	p     *pool.Pool
	conn  *sql.Conn
	txn   openTx
	stmts [Slots]*sql.Stmt
	// dbStmt is prepared on db before the first borrow and used through tx.Stmt.
	dbStmt *sql.Stmt
}

func (s *pgSide) endBorrow() {
	for i, st := range s.stmts {
		if st != nil {
			_ = st.Close()
			s.stmts[i] = nil
		}
	}
	s.txn.abandon()
	if s.conn != nil {
		if s.plain {
			// The server frees a closed session's advisory locks only when its backend
			// exits, after the close: free them now, so that the reference's next borrower
			// never meets its predecessor's locks.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, _ = s.conn.ExecContext(ctx, "ROLLBACK")
			_, _ = s.conn.ExecContext(ctx, "SELECT pg_advisory_unlock_all()")
			cancel()
		}
		_ = s.conn.Close()
		s.conn = nil
		if s.plain && s.pid != 0 {
			// A closed session's backend exits after the close; until it has, what it
			// held (advisory locks, LISTEN) is still held. A fresh connection comes after.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			for ctx.Err() == nil {
				var n int
				if err := s.admin.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", s.pid).Scan(&n); err != nil || n == 0 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			cancel()
			s.pid = 0
		}
	}
}

func (s *pgSide) close() {
	s.endBorrow()
	if s.dbStmt != nil {
		_ = s.dbStmt.Close()
	}
	_ = s.db.Close()
	if s.admin != nil {
		_ = s.admin.Close()
	}
	if s.p != nil {
		_ = s.p.Close()
	}
}

func (s *pgSide) x() execer {
	if s.txn.tx != nil {
		return s.txn.tx
	}
	return s.conn
}

func pgErrText(err error) string {
	if err == nil {
		return "ok"
	}
	var pge *pgconn.PgError
	var pqe *pq.Error
	switch {
	case errors.As(err, &pge):
		return "error " + pge.Code
	case errors.As(err, &pqe):
		return "error " + string(pqe.Code)
	case errors.Is(err, context.DeadlineExceeded):
		return "error timeout"
	}
	return "error: " + err.Error()
}

func pgRows(rows *sql.Rows, err error) string {
	if err != nil {
		return pgErrText(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return pgErrText(err)
		}
		for _, v := range vals {
			if v.Valid {
				b.WriteString(v.String)
			} else {
				b.WriteString("NULL")
			}
			b.WriteByte('|')
		}
		b.WriteByte(';')
	}
	if err := rows.Err(); err != nil {
		return b.String() + pgErrText(err)
	}
	return b.String()
}

func (s *pgSide) step(ctx context.Context, st Step) string {
	switch st.Op {
	case OpExec:
		res, err := s.x().ExecContext(ctx, st.SQL, st.Args...)
		if err != nil {
			return pgErrText(err)
		}
		n, _ := res.RowsAffected()
		return fmt.Sprintf("ok affected=%d", n)
	case OpQuery:
		rows, err := s.x().QueryContext(ctx, st.SQL, st.Args...)
		return pgRows(rows, err)
	case OpBeginTx:
		if s.txn.tx != nil {
			return "tx already open"
		}
		if err := s.txn.begin(s.conn, st); err != nil {
			return pgErrText(err)
		}
		return "ok"
	case OpCommitTx, OpRollback:
		if s.txn.tx == nil {
			return "no tx"
		}
		return pgErrText(s.txn.finish(st.Op == OpCommitTx))
	case OpPrepare:
		if s.stmts[st.Slot] != nil {
			_ = s.stmts[st.Slot].Close()
			s.stmts[st.Slot] = nil
		}
		stmt, err := s.conn.PrepareContext(ctx, st.SQL)
		s.stmts[st.Slot] = nil
		if err == nil {
			s.stmts[st.Slot] = stmt
		}
		return pgErrText(err)
	case OpStmtQuery, OpStmtExec:
		if st.Slot == Slots {
			if s.txn.tx == nil {
				return "no tx"
			}
			return pgRows(s.txn.tx.StmtContext(ctx, s.dbStmt).QueryContext(ctx, st.Args...))
		}
		stmt := s.stmts[st.Slot]
		if stmt == nil {
			return "no stmt"
		}
		if s.txn.tx != nil {
			stmt = s.txn.tx.StmtContext(ctx, stmt)
		}
		rows, err := stmt.QueryContext(ctx, st.Args...)
		return pgRows(rows, err)
	}
	return "?"
}

func (s *pgSide) view(ctx context.Context) (map[string]string, error) {
	rows, err := s.conn.QueryContext(ctx, pgViewQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	v := map[string]string{}
	for rows.Next() {
		var k, val string
		if err := rows.Scan(&k, &val); err != nil {
			return nil, err
		}
		v[k] = val
	}
	return v, rows.Err()
}

func (s *pgSide) borrow(ctx context.Context) (map[string]string, error) {
	s.endBorrow()
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	s.conn = c
	if s.plain {
		if err := c.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&s.pid); err != nil {
			return nil, err
		}
	}
	return s.view(ctx)
}

// Run runs p on both sides and returns the first divergence, or nil.
func (r *PGRunner) Run(p Program) (*Divergence, error) {
	var sides [2]*pgSide
	for i, name := range []string{"r", "p"} {
		if err := r.reset(name); err != nil {
			return nil, err
		}
		c, err := r.o.Connector(r.o.Prefix + "_" + name)
		if err != nil {
			return nil, err
		}
		s := &pgSide{plain: name == "r"}
		if name == "r" {
			s.db = sql.OpenDB(c)
			s.db.SetMaxIdleConns(0)
			s.admin = sql.OpenDB(c)
			s.admin.SetMaxOpenConns(1)
		} else {
			s.p, err = pool.New(c, pool.Config{MaxConns: 1, MinIdleConns: -1, Dialect: r.o.Dialect,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				return nil, err
			}
			s.db = s.p.OpenDB()
		}
		defer s.close()
		sides[i] = s
	}
	for i, s := range sides {
		ctx, cancel := context.WithTimeout(context.Background(), r.o.StepTimeout)
		st, err := s.db.PrepareContext(ctx, pgDBStmtSQL)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("difftest: preparing the DB statement on side %d: %w", i, err)
		}
		s.dbStmt = st
	}
	borrow := func(i int) (*Divergence, error) {
		ctx, cancel := context.WithTimeout(context.Background(), r.o.StepTimeout)
		defer cancel()
		va, err := sides[0].borrow(ctx)
		if err != nil {
			return nil, fmt.Errorf("difftest: plain borrow at step %d: %w", i, err)
		}
		vb, err := sides[1].borrow(ctx)
		if err != nil {
			return &Divergence{Step: i, What: "borrow", Plain: "ok", Pooled: pgErrText(err)}, nil
		}
		keys := make([]string, 0, len(va))
		for k := range va {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if va[k] != vb[k] {
				return &Divergence{Step: i, What: "session at borrow: " + k, Plain: va[k], Pooled: vb[k]}, nil
			}
		}
		return nil, nil
	}
	if d, err := borrow(-1); d != nil || err != nil {
		return d, err
	}
	for i, st := range p {
		if st.Op == OpBorrow {
			if d, err := borrow(i); d != nil || err != nil {
				return d, err
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.o.StepTimeout)
		a := sides[0].step(ctx, st)
		b := sides[1].step(ctx, st)
		cancel()
		if st.Op == OpPrepare && a == "error 25P02" && b == "ok" {
			// pgx's stdlib answers a Prepare of a text it holds prepared on the connection
			// from its own map, without a round trip, so in a failed transaction it succeeds
			// where the server would refuse it (25P02). A new connection does the same for a
			// text prepared earlier in the borrow; through the pool the map also holds texts
			// the pool's statement cache keeps from earlier borrows. The statement's first
			// execution fails with 25P02 as the server would (docs/postgresql.md). Both sides
			// go on without the statement.
			_ = sides[1].stmts[st.Slot].Close()
			sides[1].stmts[st.Slot] = nil
			continue
		}
		if st.Op == OpBeginTx && a == "error 25001" && b == "ok" {
			// The same reuse one step later: BeginTx inside a transaction block that the
			// borrower opened with a BEGIN of its own sets the isolation level, which
			// PostgreSQL refuses (25001) once a statement ran in the block; a Prepare that
			// pgx's stdlib answered from its cache sent none. The sides' transactions now
			// differ, so the borrow ends on both.
			_ = sides[1].txn.finish(false)
			if d, err := borrow(i); d != nil || err != nil {
				return d, err
			}
			continue
		}
		if a != b {
			return &Divergence{Step: i, What: st.String(), Plain: a, Pooled: b}, nil
		}
	}
	return borrow(len(p))
}
