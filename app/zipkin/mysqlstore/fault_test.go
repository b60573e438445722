package mysqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// Commit faults of faultConnector.
const (
	noFault          = iota
	loseAfterCommit  // COMMIT applied, its answer lost: the connection "breaks"
	loseBeforeCommit // the transaction rolled back, the connection breaks while COMMIT is in flight
)

// faultConnector wraps go-sql-driver/mysql and can make the next COMMIT fail with
// mysql.ErrInvalidConn — the error of a connection lost while COMMIT was in flight — after or
// instead of committing, so that the outcome is genuinely unknown to the caller.
type faultConnector struct {
	driver.Connector
	next atomic.Int32
}

func (c *faultConnector) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: cn, c: c}, nil
}

type faultConn struct {
	driver.Conn
	c   *faultConnector
	bad atomic.Bool
}

func (fc *faultConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := fc.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &faultTx{Tx: tx, fc: fc}, nil
}

func (fc *faultConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return fc.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (fc *faultConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return fc.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (fc *faultConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return fc.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (fc *faultConn) CheckNamedValue(nv *driver.NamedValue) error {
	return fc.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (fc *faultConn) ResetSession(ctx context.Context) error {
	if fc.bad.Load() {
		return driver.ErrBadConn
	}
	return fc.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (fc *faultConn) IsValid() bool { return !fc.bad.Load() && fc.Conn.(driver.Validator).IsValid() }

type faultTx struct {
	driver.Tx
	fc *faultConn
}

func (t *faultTx) Commit() error {
	switch t.fc.c.next.Swap(noFault) {
	case loseAfterCommit:
		if err := t.Tx.Commit(); err != nil {
			return err
		}
		t.fc.bad.Store(true)
		return mysql.ErrInvalidConn
	case loseBeforeCommit:
		_ = t.Tx.Rollback()
		t.fc.bad.Store(true)
		return mysql.ErrInvalidConn
	}
	return t.Tx.Commit()
}

// A commit whose outcome is unknown is replayed (the writes are idempotent) and counted; the
// batch is stored exactly once whether the lost COMMIT had been applied or not.
func TestAcceptReplaysAmbiguousCommit(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		for _, tc := range []struct {
			name  string
			fault int32
		}{{"committed", loseAfterCommit}, {"rolled back", loseBeforeCommit}} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := ctxT(t)
				dsn := freshDatabase(t, srv.dsn)
				cfg, _ := mysql.ParseDSN(dsn)
				inner, err := mysql.NewConnector(cfg)
				if err != nil {
					t.Fatal(err)
				}
				fc := &faultConnector{Connector: inner}
				db := sql.OpenDB(fc)
				t.Cleanup(func() { db.Close() })
				if err := mysqlstore.CreateSchema(ctx, db); err != nil {
					t.Fatal(err)
				}
				s, err := mysqlstore.Open(ctx, db, mysqlstore.Options{Logger: quietLogger})
				if err != nil {
					t.Fatal(err)
				}
				spans := testSpans(3, 30)
				fc.next.Store(tc.fault)
				if err := s.Accept(ctx, spans); err != nil {
					t.Fatalf("Accept = %v, want the ambiguous commit replayed", err)
				}
				st := s.Stats()
				if st.AmbiguousCommits != 1 || st.Replays != 1 || st.Batches != 1 || st.Failures != 0 {
					t.Errorf("Stats = %+v, want 1 ambiguous commit, 1 replay, 1 batch", st)
				}
				if n := count(t, db, "zipkin_spans"); n != 30 {
					t.Errorf("%d span rows, want 30", n)
				}
				// With replays off, the ambiguous outcome reaches the caller, counted.
				s2, err := mysqlstore.Open(ctx, db, mysqlstore.Options{Logger: quietLogger, MaxAmbiguousReplays: -1})
				if err != nil {
					t.Fatal(err)
				}
				fc.next.Store(tc.fault)
				err = s2.Accept(ctx, testSpans(4, 10))
				if !errors.Is(err, retry.ErrAmbiguousCommit) {
					t.Fatalf("Accept without replays = %v, want ErrAmbiguousCommit", err)
				}
				if st := s2.Stats(); st.AmbiguousCommits != 1 || st.Replays != 0 || st.Failures != 1 {
					t.Errorf("Stats without replays = %+v, want 1 ambiguous commit, 0 replays, 1 failure", st)
				}
			})
		}
	})
}

// faultBatch returns the 20 spans (two traces of 10) of batch k of writer w: trace IDs unique to
// the batch, the same shape for every batch.
func faultBatch(w, k int) []model.Span {
	spans := testSpans(0, 20)
	for i := range spans {
		spans[i].TraceID = model.TraceID{High: uint64(w + 1), Low: uint64(k)<<8 | uint64(w)<<1 | uint64(i/10)}
	}
	return spans
}

// KILL of every server thread, then a MariaDB restart, during a steady stream of batch writes
// through the pool: every batch whose Accept returned nil is in the database afterwards, with
// exactly its rows (none twice).
func TestAcceptSurvivesKillAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a private MariaDB")
	}
	m := mysqltest.StartMariaDB(t)
	ctx := ctxT(t)
	cfg, err := mysql.ParseDSN(m.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = nopDriverLogger{}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(connector, pool.Config{
		Name: "zstore-fault", MaxConns: 4, AcquireTimeout: 10 * time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	db := p.OpenDB()
	defer p.Close()
	defer db.Close()
	if err := mysqlstore.CreateSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	s, err := mysqlstore.Open(ctx, db, mysqlstore.Options{
		Logger: quietLogger,
		Retry: retry.Policy{MaxAttempts: 6, BaseDelay: 20 * time.Millisecond, MaxDelay: 500 * time.Millisecond,
			Budget: retry.NewBudget(retry.BudgetConfig{})},
	})
	if err != nil {
		t.Fatal(err)
	}
	admin := openPlain(t, m.DSN())
	admin.SetMaxOpenConns(1)

	// Calibration: the rows of one batch.
	if err := s.Accept(ctx, faultBatch(99, 0)); err != nil {
		t.Fatal(err)
	}
	annPerBatch := count(t, db, "zipkin_annotations")

	const writers = 4
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
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				err := s.Accept(ctx, faultBatch(w, k))
				if err == nil {
					oks.Add(1)
				}
				mu.Lock()
				results = append(results, result{w, k, err})
				mu.Unlock()
			}
		}(w)
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
		deadline := time.Now().Add(90 * time.Second)
		for oks.Load() < target {
			if time.Now().After(deadline) {
				stopWriters()
				t.Fatalf("%s: no progress: %d successful batches, want %d", what, oks.Load(), target)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	killAll := func() int {
		rows, err := admin.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE user = ? AND id <> CONNECTION_ID()", cfg.User)
		if err != nil {
			t.Fatalf("processlist: %v", err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		n := 0
		for _, id := range ids {
			if _, err := admin.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err == nil {
				n++
			}
		}
		return n
	}

	progress("before the faults", 20)
	killed := 0
	for i := 0; i < 3; i++ {
		killed += killAll()
		progress(fmt.Sprintf("after KILL round %d", i+1), 10)
	}
	m.Restart(t)
	progress("after the restart", 20)
	stopWriters()

	// Every batch that returned nil is there with exactly its rows.
	spanRows := map[[2]int64]int{}
	annRows := map[[2]int64]int{}
	for _, q := range []struct {
		sql string
		m   map[[2]int64]int
	}{
		{"SELECT trace_id_high, trace_id, COUNT(*) FROM zipkin_spans GROUP BY trace_id_high, trace_id", spanRows},
		{"SELECT trace_id_high, trace_id, COUNT(*) FROM zipkin_annotations GROUP BY trace_id_high, trace_id", annRows},
	} {
		rows, err := admin.QueryContext(ctx, q.sql)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var hi, lo int64
			var n int
			if err := rows.Scan(&hi, &lo, &n); err != nil {
				t.Fatal(err)
			}
			q.m[[2]int64{hi, lo}] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	var ok, failed, missing int
	for _, r := range results {
		if r.err != nil {
			failed++
			continue
		}
		ok++
		var spans, anns int
		batch := faultBatch(r.w, r.k)
		for tr := 0; tr < 2; tr++ {
			sp := batch[tr*10]
			key := [2]int64{int64(sp.TraceID.High), int64(sp.TraceID.Low)}
			spans += spanRows[key]
			anns += annRows[key]
		}
		if spans != 20 || anns != annPerBatch {
			missing++
			if missing <= 5 {
				t.Errorf("batch %d of writer %d returned nil but has %d span rows and %d annotation rows, want 20 and %d",
					r.k, r.w, spans, anns, annPerBatch)
			}
		}
	}
	st := s.Stats()
	t.Logf("%d batches stored and verified, %d failed (returned an error), %d threads killed; %+v",
		ok, failed, killed, st)
	if missing > 0 {
		t.Errorf("%d successful batches are not in the database as written", missing)
	}
	if killed == 0 {
		t.Errorf("KILL found no thread of the pool to kill")
	}
}
