package difftest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import
	"github.com/sqlpool/sqlpool/pool"
)

// Options configure a run.
type Options struct {
	// DSN is a go-sql-driver/mysql DSN of a user that may create and drop databases; its
	// database part is ignored (each side gets its own).
	DSN string
	// Prefix names the run's databases: <Prefix>_r_a, <Prefix>_r_b (plain database/sql) and
	// <Prefix>_p_a, <Prefix>_p_b (the pool). Zero value: "difftest".
	Prefix string
	// Vocabulary is what the programs may use.
	Vocabulary Vocabulary
	// Inject, when not empty, makes the pool's side skip one kind of release statement: every
	// statement without arguments sent through Exec that starts with Inject (for example
	// "UNLOCK TABLES", which the vocabulary sends through Query only), as if the
	// pool had forgotten that reset. Used to prove the fuzzer finds and shrinks a divergence.
	Inject string
	// StepTimeout bounds one step and one session view. Zero value: 10 s.
	StepTimeout time.Duration
	// OnStep, if not nil, is called after each step (a borrow included) with its duration on
	// both sides, for profiling.
	OnStep func(i int, s Step, d time.Duration)
}

// Divergence is the first difference a run found.
type Divergence struct {
	Step   int    // index of the step (or of the borrow whose view differed)
	What   string // what differed
	Plain  string // plain database/sql's result (or the fresh connection's view)
	Pooled string // the pool's
}

func (d *Divergence) Error() string {
	return fmt.Sprintf("step %d: %s:\n  plain database/sql: %s\n  pool:               %s", d.Step, d.What, d.Plain, d.Pooled)
}

// excludedVars are the SESSION_VARIABLES rows that differ between any two fresh connections
// (checked on MariaDB 10.11 by diffing two new connections' rows): pseudo_thread_id is the
// connection id, rand_seed1/rand_seed2 are seeded per connection. timestamp is the clock and is
// compared within a minute rather than excluded, so a borrower's SET timestamp still shows.
var excludedVars = map[string]bool{"PSEUDO_THREAD_ID": true, "RAND_SEED1": true, "RAND_SEED2": true}

// embeddedExcludedVars are left out on the embedded server too: it ignores SET last_insert_id
// (the reset the pool sends), so LAST_INSERT_ID() is compared on MariaDB only.
var embeddedExcludedVars = map[string]bool{"LAST_INSERT_ID": true, "IDENTITY": true, "INSERT_ID": true}

// Runner runs programs on one server. It is not safe for concurrent use.
type Runner struct {
	o     Options
	cfg   *mysql.Config
	admin *sql.DB
	setup []string
}

// NewRunner connects to o.DSN.
func NewRunner(o Options) (*Runner, error) {
	if o.Prefix == "" {
		o.Prefix = "difftest"
	}
	if o.StepTimeout == 0 {
		o.StepTimeout = 10 * time.Second
	}
	cfg, err := mysql.ParseDSN(o.DSN)
	if err != nil {
		return nil, err
	}
	cfg.Logger = nopLogger{}
	ac := cfg.Clone()
	ac.DBName = ""
	c, err := mysql.NewConnector(ac)
	if err != nil {
		return nil, err
	}
	r := &Runner{o: o, cfg: cfg, admin: sql.OpenDB(c)}
	r.admin.SetMaxOpenConns(1)
	return r, nil
}

// Close closes the runner's connections and drops its databases.
func (r *Runner) Close() error {
	ctx := context.Background()
	for _, s := range []string{"r", "p"} {
		for _, d := range []string{"a", "b"} {
			_, _ = r.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+r.o.Prefix+"_"+s+"_"+d)
		}
	}
	return r.admin.Close()
}

type nopLogger struct{}

func (nopLogger) Print(...any) {}

// reset recreates a side's two databases, identical but for the data that tells them apart.
func (r *Runner) reset(ctx context.Context, side string) error {
	for _, d := range []string{"a", "b"} {
		name := r.o.Prefix + "_" + side + "_" + d
		stmts := []string{
			"DROP DATABASE IF EXISTS " + name,
			"CREATE DATABASE " + name,
			"CREATE TABLE " + name + ".t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64), ts TIMESTAMP NULL)",
			"INSERT INTO " + name + ".t (v, ts) VALUES ('" + d + "1', '2020-01-01 00:00:00'), ('" + d + "2', NULL), ('" + d + "3', NULL)",
			"CREATE TABLE " + name + ".n (id INT PRIMARY KEY, s VARCHAR(8), UNIQUE KEY (s))",
			"CREATE TABLE " + name + ".u (k INT PRIMARY KEY, parent INT, FOREIGN KEY (parent) REFERENCES " + name + ".t (id))",
		}
		if !r.o.Vocabulary.Embedded {
			stmts[2] += " ENGINE=InnoDB"
			stmts = append(stmts, "CREATE PROCEDURE "+name+".pset() BEGIN SET @pv = 42; SET @u = 41; END")
		}
		for _, q := range stmts {
			if _, err := r.admin.ExecContext(ctx, q); err != nil {
				if r.o.Vocabulary.Embedded && strings.Contains(q, "FOREIGN KEY") {
					continue
				}
				return fmt.Errorf("setup %q: %w", q, err)
			}
		}
	}
	return nil
}

// side is one of the two worlds.
type side struct {
	name   string
	r      *Runner
	db     *sql.DB // the borrowers' *sql.DB
	fresh  *sql.DB // plain, a new physical connection per Conn: the reference view
	closer io.Closer
	subst  *strings.Replacer
	norm   *strings.Replacer
	locks  []string
	conn   *sql.Conn
	txn    openTx
	stmts  [Slots]*sql.Stmt
	texts  [Slots]string // the text each slot's statement was prepared from
	// obs is the observer connection and freshSess a new connection's session part (freshView).
	obs         *sql.Conn
	freshSess   view
	freshDigest string // digestQuery's row on a fresh connection
}

func (r *Runner) connector(dbName string) (driver.Connector, error) {
	c := r.cfg.Clone()
	c.DBName = dbName
	c.MultiStatements = !r.o.Vocabulary.Embedded
	c.Logger = nopLogger{}
	return mysql.NewConnector(c)
}

func (r *Runner) newSide(name string, pooled bool) (*side, error) {
	a, b, l := r.o.Prefix+"_"+name+"_a", r.o.Prefix+"_"+name+"_b", r.o.Prefix+"_"+name+"_l"
	s := &side{name: name, r: r,
		subst: strings.NewReplacer("{A}", a, "{B}", b, "{L}", l),
		norm:  strings.NewReplacer(a, "A", b, "B", l, "L"),
		locks: []string{l + "1", l + "2"},
	}
	c, err := r.connector(a)
	if err != nil {
		return nil, err
	}
	s.fresh = sql.OpenDB(c)
	s.fresh.SetMaxIdleConns(0)
	if !pooled {
		s.db = sql.OpenDB(c)
		s.db.SetMaxIdleConns(0)
		return s, nil
	}
	var pc driver.Connector = c
	if r.o.Inject != "" {
		pc = &injectConnector{Connector: c, prefix: r.o.Inject}
	}
	p, err := pool.New(pc, pool.Config{MaxConns: 1, MinIdleConns: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	s.db, s.closer = p.OpenDB(), p
	return s, nil
}

func (s *side) close() {
	s.endBorrow()
	if s.obs != nil {
		_ = s.obs.Close()
	}
	_ = s.db.Close()
	if s.closer != nil {
		_ = s.closer.Close()
	}
	_ = s.fresh.Close()
}

// endBorrow closes what the borrower holds through database/sql and gives the connection back.
// A sql.Tx is rolled back first (database/sql has no way to abandon one); transactions begun
// by text stay open, for the pool to clean.
func (s *side) endBorrow() {
	for i, st := range s.stmts {
		if st != nil {
			_ = st.Close()
			s.stmts[i] = nil
		}
	}
	s.txn.abandon()
	if s.conn != nil {
		_ = s.conn.Close()
		s.conn = nil
	}
}

type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func (s *side) x() execer {
	if s.txn.tx != nil {
		return s.txn.tx
	}
	return s.conn
}

// step runs one step and returns its normalized outcome.
func (s *side) step(ctx context.Context, st Step) string {
	q := s.subst.Replace(st.SQL)
	switch st.Op {
	case OpExec:
		return s.norm.Replace(result(s.x().ExecContext(ctx, q, st.Args...)))
	case OpQuery:
		rows, err := s.x().QueryContext(ctx, q, st.Args...)
		return s.norm.Replace(readRows(rows, err))
	case OpBeginTx:
		if s.txn.tx != nil {
			return "tx already open"
		}
		if err := s.txn.begin(s.conn, st); err != nil {
			return errText(err)
		}
		return "ok"
	case OpCommitTx, OpRollback:
		if s.txn.tx == nil {
			return "no tx"
		}
		return errText(s.txn.finish(st.Op == OpCommitTx))
	case OpPrepare:
		if s.stmts[st.Slot] != nil {
			_ = s.stmts[st.Slot].Close()
			s.stmts[st.Slot] = nil
		}
		stmt, err := s.conn.PrepareContext(ctx, q)
		if err != nil {
			return s.norm.Replace(errText(err))
		}
		s.stmts[st.Slot], s.texts[st.Slot] = stmt, st.SQL
		return "ok"
	case OpStmtExec, OpStmtQuery:
		stmt := s.stmts[st.Slot]
		if stmt == nil {
			return "no stmt"
		}
		// Exec of a statement that returns rows makes go-sql-driver/mysql hang or lose the
		// connection (plain database/sql too), so those are always queried.
		if st.Op == OpStmtExec && !strings.HasPrefix(s.texts[st.Slot], "SELECT") {
			return s.norm.Replace(result(stmt.ExecContext(ctx, st.Args...)))
		}
		rows, err := stmt.QueryContext(ctx, st.Args...)
		return s.norm.Replace(readRows(rows, err))
	case OpStmtClose:
		if s.stmts[st.Slot] == nil {
			return "no stmt"
		}
		err := s.stmts[st.Slot].Close()
		s.stmts[st.Slot] = nil
		return errText(err)
	}
	return "?"
}

func result(res sql.Result, err error) string {
	if err != nil {
		return errText(err)
	}
	n, err1 := res.RowsAffected()
	id, err2 := res.LastInsertId()
	return fmt.Sprintf("ok affected=%d id=%d %v %v", n, id, err1 != nil, err2 != nil)
}

// errText is an error as compared: the MySQL error number, or the text of any other error.
func errText(err error) string {
	if err == nil {
		return "ok"
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return "error " + strconv.Itoa(int(me.Number))
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "error timeout"
	}
	return "error: " + err.Error()
}

func readRows(rows *sql.Rows, err error) string {
	if err != nil {
		return errText(err)
	}
	defer rows.Close()
	var b strings.Builder
	for set := 0; ; set++ {
		cols, err := rows.Columns()
		if err != nil {
			return errText(err)
		}
		if set > 0 {
			b.WriteString(" ;; ")
		}
		b.WriteString(strings.Join(cols, ","))
		b.WriteString(": ")
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				return errText(err)
			}
			b.WriteByte('[')
			for i, v := range vals {
				if i > 0 {
					b.WriteByte('|')
				}
				if v == nil {
					b.WriteString("NULL")
				} else {
					b.WriteString(strconv.Quote(string(v)))
				}
			}
			b.WriteByte(']')
		}
		if err := rows.Err(); err != nil {
			b.WriteString(" " + errText(err))
			return b.String()
		}
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		b.WriteString(" " + errText(err))
	}
	return b.String()
}

// view is what a connection's session looks like to its borrower, by item.
type view map[string]string

// sessionView reads the session view through c: an open transaction, the current database,
// every session variable but the excluded ones, the user variables that are not NULL (a
// variable set to NULL reads as one never set, and no statement deletes one: SET @a = NULL is
// the reset), named locks held by anyone, and each table the program can shadow or create.
func (s *side) sessionView(ctx context.Context, c *sql.Conn) (view, error) {
	v := view{}
	if err := s.sessionPart(ctx, c, v); err != nil {
		return nil, err
	}
	if err := s.serverPart(ctx, c, v); err != nil {
		return nil, err
	}
	return v, nil
}

// query1 reads q's rows into v[key]; a MySQL error is a value too.
func (s *side) query1(ctx context.Context, c *sql.Conn, v view, key, q string) error {
	rows, err := c.QueryContext(ctx, q)
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			v[key] = errText(err)
			return nil
		}
		return err
	}
	v[key] = s.norm.Replace(readRows(rows, nil))
	return nil
}

// sessionPart reads what belongs to the session alone: an open transaction, the database,
// the session variables and the user variables.
func (s *side) sessionPart(ctx context.Context, c *sql.Conn, v view) error {
	return s.sessionPartFrom(ctx, c, v, false)
}

// digestQuery is one row that stands for every SESSION_VARIABLES row compared (the excluded
// ones and timestamp aside): their count and two order-free checksums (no GROUP_CONCAT, whose
// length a borrower's group_concat_max_len would cut), then whether timestamp is within a minute
// of the client's clock (%d; not UNIX_TIMESTAMP(), which a SET timestamp moves too). Only single
// quotes and no backslashes, so any sql_mode reads it the same.
const digestQuery = "SELECT COUNT(*), SUM(CRC32(CONCAT(VARIABLE_NAME, '=', IFNULL(VARIABLE_VALUE, 'NULL')))), " +
	"BIT_XOR(CRC32(CONCAT(IFNULL(VARIABLE_VALUE, 'NULL'), '#', VARIABLE_NAME))), ABS(@@timestamp - %d) < 60 " +
	"FROM information_schema.SESSION_VARIABLES " +
	"WHERE VARIABLE_NAME NOT IN ('PSEUDO_THREAD_ID', 'RAND_SEED1', 'RAND_SEED2', 'TIMESTAMP')"

// digest returns c's digestQuery row as text.
func digest(ctx context.Context, c *sql.Conn) (string, error) {
	var n, sum, xor, now string
	if err := c.QueryRowContext(ctx, fmt.Sprintf(digestQuery, time.Now().Unix())).Scan(&n, &sum, &xor, &now); err != nil {
		return "", err
	}
	return n + " " + sum + " " + xor + " " + now, nil
}

// sessionPartFrom is sessionPart; with quick, the session variables are first compared by
// digest with a fresh connection's and read row by row only when they differ (to name the
// difference).
func (s *side) sessionPartFrom(ctx context.Context, c *sql.Conn, v view, quick bool) error {
	emb := s.r.o.Vocabulary.Embedded
	if emb {
		if err := s.query1(ctx, c, v, "database", "SELECT DATABASE()"); err != nil {
			return err
		}
	} else if err := s.query1(ctx, c, v, "in_transaction,database", "SELECT @@in_transaction, DATABASE()"); err != nil {
		return err
	}
	if quick && !emb && s.freshDigest != "" {
		d, err := digest(ctx, c)
		if err != nil {
			return err
		}
		if d == s.freshDigest {
			for k, x := range s.freshSess {
				if strings.HasPrefix(k, "@@") {
					v[k] = x
				}
			}
			return s.userVarsPart(ctx, c, v)
		}
	}
	q := "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.SESSION_VARIABLES"
	if emb {
		q = "SHOW SESSION VARIABLES"
	}
	rows, err := c.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	for rows.Next() {
		var name string
		var val sql.NullString
		if err := rows.Scan(&name, &val); err != nil {
			rows.Close()
			return err
		}
		name = strings.ToUpper(name)
		if excludedVars[name] || emb && embeddedExcludedVars[name] {
			continue
		}
		if name == "TIMESTAMP" {
			f, _ := strconv.ParseFloat(val.String, 64)
			if d := float64(time.Now().Unix()) - f; d < 60 && d > -60 {
				val.String = "now"
			}
		}
		v["@@"+name] = s.norm.Replace(val.String)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	return s.userVarsPart(ctx, c, v)
}

// userVarsPart reads the user variables that are not NULL.
func (s *side) userVarsPart(ctx context.Context, c *sql.Conn, v view) error {
	if s.r.o.Vocabulary.Embedded {
		return s.query1(ctx, c, v, "user variables", "SELECT @u, @v, @w, @pv, @m, @tenant, @pid")
	}
	return s.query1(ctx, c, v, "user variables", "SELECT VARIABLE_NAME, VARIABLE_VALUE, VARIABLE_TYPE FROM information_schema.USER_VARIABLES WHERE VARIABLE_VALUE IS NOT NULL ORDER BY 1")
}

// serverPart reads what the session sees of the server: named locks held by anyone, and each
// table the program can shadow with a temporary one, lock or create.
func (s *side) serverPart(ctx context.Context, c *sql.Conn, v view) error {
	for _, l := range s.locks {
		if err := s.query1(ctx, c, v, "lock "+s.norm.Replace(l), "SELECT IS_USED_LOCK('"+l+"') IS NOT NULL"); err != nil {
			return err
		}
	}
	for _, d := range []string{"{A}", "{B}"} {
		for _, t := range []string{"t", "tmp1", "n", "u"} {
			tbl := s.subst.Replace(d) + "." + t
			if err := s.query1(ctx, c, v, "table "+s.norm.Replace(tbl), "SELECT COUNT(*), COALESCE(SUM(id), 0) FROM "+tbl); err != nil {
				return err
			}
		}
	}
	return nil
}

// freshView is a brand-new connection's view: the session part read once from a new
// connection (it is the same for every new connection, the excluded variables aside), the
// server part read now through an observer connection that never runs a program's statement.
func (s *side) freshView(ctx context.Context) (view, error) {
	if s.obs == nil {
		c, err := s.fresh.Conn(ctx)
		if err != nil {
			return nil, err
		}
		s.obs = c
		s.freshSess = view{}
		if err := s.sessionPart(ctx, c, s.freshSess); err != nil {
			return nil, err
		}
		if !s.r.o.Vocabulary.Embedded {
			d, err := digest(ctx, c)
			if err != nil {
				return nil, err
			}
			s.freshDigest = d
		}
		// A table lock the pool leaked would block the observer's reads until
		// lock_wait_timeout (a day by default): make it an error the views show instead.
		if !s.r.o.Vocabulary.Embedded {
			if _, err := c.ExecContext(ctx, "SET SESSION lock_wait_timeout = 1, innodb_lock_wait_timeout = 1"); err != nil {
				return nil, err
			}
		}
	}
	v := view{}
	for k, x := range s.freshSess {
		v[k] = x
	}
	if err := s.serverPart(ctx, s.obs, v); err != nil {
		return nil, err
	}
	return v, nil
}

// diffViews returns the first item (sorted) where two views differ.
func diffViews(a, b view) (key, va, vb string, ok bool) {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, dup := a[k]; !dup {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		x, okx := a[k]
		y, oky := b[k]
		if !okx {
			x = "(missing)"
		}
		if !oky {
			y = "(missing)"
		}
		if x != y {
			return k, x, y, true
		}
	}
	return "", "", "", false
}

// borrow ends the current borrow and starts the next, comparing the new session with a fresh
// connection's. For the plain side, whose every borrow is a fresh connection, it waits until
// the server has finished closing the last one (named locks are released after the socket
// closes) so that the reference itself is deterministic; the pool gets no such wait.
func (s *side) borrow(ctx context.Context, pooled bool) (diff string, fresh, got string, err error) {
	s.endBorrow()
	if !pooled {
		if err := s.waitLocksFree(ctx); err != nil {
			return "", "", "", err
		}
	}
	c, err := s.db.Conn(ctx)
	if err != nil {
		return "", "", "", err
	}
	s.conn = c
	want, err := s.freshView(ctx)
	if err != nil {
		return "", "", "", fmt.Errorf("fresh view: %w", err)
	}
	have := view{}
	err = s.sessionPartFrom(ctx, c, have, true)
	if err == nil {
		err = s.serverPart(ctx, c, have)
	}
	if err != nil {
		return "", "", "", fmt.Errorf("borrowed view: %w", err)
	}
	if k, a, b, ok := diffViews(want, have); ok {
		return k, a, b, nil
	}
	return "", "", "", nil
}

// borrowQuietly ends the current borrow and starts the next without looking at its session, so
// that whatever the pool left (or defers resetting) reaches the next steps unobserved.
func (s *side) borrowQuietly(ctx context.Context, pooled bool) error {
	s.endBorrow()
	bctx, cancel := context.WithTimeout(ctx, 2*s.r.o.StepTimeout)
	defer cancel()
	if !pooled {
		if err := s.waitLocksFree(bctx); err != nil {
			return err
		}
	}
	c, err := s.db.Conn(bctx)
	if err != nil {
		return err
	}
	s.conn = c
	return nil
}

func (s *side) waitLocksFree(ctx context.Context) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		held := false
		for _, l := range s.locks {
			var n int
			if err := s.r.admin.QueryRowContext(ctx, "SELECT IS_USED_LOCK('"+l+"') IS NOT NULL").Scan(&n); err != nil {
				return err
			}
			held = held || n != 0
		}
		if !held || time.Now().After(deadline) {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
}

// Run runs p on both sides and returns the first divergence, nil if none, or an error when the
// harness itself failed.
func (r *Runner) Run(p Program) (*Divergence, error) {
	ctx := context.Background()
	for _, s := range []string{"r", "p"} {
		if err := r.reset(ctx, s); err != nil {
			return nil, err
		}
	}
	ref, err := r.newSide("r", false)
	if err != nil {
		return nil, err
	}
	defer ref.close()
	pl, err := r.newSide("p", true)
	if err != nil {
		return nil, err
	}
	defer pl.close()
	borrow := func(i int) (*Divergence, error) {
		bctx, cancel := context.WithTimeout(ctx, 2*r.o.StepTimeout)
		defer cancel()
		for _, s := range []*side{ref, pl} {
			k, want, have, err := s.borrow(bctx, s == pl)
			if err != nil {
				return nil, fmt.Errorf("step %d: %s side: %w", i, s.name, err)
			}
			if k != "" {
				if s == ref {
					return nil, fmt.Errorf("step %d: plain database/sql's own borrow differs from a fresh connection at %s: %s vs %s", i, k, want, have)
				}
				return &Divergence{Step: i, What: "new borrow's session differs from a fresh connection's at " + k, Plain: want, Pooled: have}, nil
			}
		}
		return nil, nil
	}
	if d, err := borrow(-1); d != nil || err != nil {
		return d, err
	}
	xa := false // the borrow ran XA START
	for i, st := range p {
		start := time.Now()
		if st.Op == OpBorrow && !st.Snapshot && !xa {
			for _, s := range []*side{ref, pl} {
				if err := s.borrowQuietly(ctx, s == pl); err != nil {
					return nil, fmt.Errorf("step %d: %s side: %w", i, s.name, err)
				}
			}
			if r.o.OnStep != nil {
				r.o.OnStep(i, st, time.Since(start))
			}
			continue
		}
		if st.Op == OpBorrow {
			// After XA START the borrow is compared whatever Snapshot says: a connection closed
			// with its XA transaction open frees the xid only once the server has ended the
			// session, and the next borrow's XA START on a new connection (the pool discards
			// one it cannot reset; plain database/sql always dials) may come first (1440,
			// XAER_DUPID) on either side; the comparison's queries give the server that time.
			xa = false
			if d, err := borrow(i); d != nil || err != nil {
				return d, err
			}
			if r.o.OnStep != nil {
				r.o.OnStep(i, st, time.Since(start))
			}
			continue
		}
		xa = xa || strings.HasPrefix(st.SQL, "XA START")
		sctx, cancel := context.WithTimeout(ctx, r.o.StepTimeout)
		a := ref.step(sctx, st)
		b := pl.step(sctx, st)
		cancel()
		if r.o.OnStep != nil {
			r.o.OnStep(i, st, time.Since(start))
		}
		if a != b {
			return &Divergence{Step: i, What: "result of " + st.String(), Plain: a, Pooled: b}, nil
		}
	}
	return borrow(len(p))
}

// Shrink returns a shorter program that still diverges, by delta debugging: it cuts the
// program after the step that diverged, then removes chunks of steps, halving the chunk size,
// while the rest still diverges (any divergence counts). budget bounds the runs.
func (r *Runner) Shrink(p Program, d *Divergence, budget int) (Program, *Divergence, error) {
	if d.Step+1 < len(p) && d.Step >= 0 {
		p = append(Program(nil), p[:d.Step+1]...)
	}
	runs := 0
	for n := len(p) / 2; n >= 1 && runs < budget; {
		removed := false
		for start := 0; start < len(p) && runs < budget; {
			cand := append(append(Program(nil), p[:start]...), p[min(start+n, len(p)):]...)
			runs++
			d2, err := r.Run(cand)
			if err != nil {
				return nil, nil, err
			}
			if d2 != nil {
				p, d = cand, d2
				if d.Step+1 < len(p) && d.Step >= 0 {
					p = p[:d.Step+1]
				}
				removed = true
				continue
			}
			start += n
		}
		if !removed {
			n /= 2
		}
	}
	return p, d, nil
}
