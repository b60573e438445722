package bench

import (
	"context"
	"fmt"
	"time"
)

// The benchmarks, as DESIGN.md defines them after HikariCP-benchmark.
const (
	// BenchCycleConnection is db.Conn + Close (HikariCP's ConnectionBench.cycleCnnection):
	// pure borrow and return.
	BenchCycleConnection = "cycleConnection"
	// BenchCycleStatement is borrow, SELECT 1, scan, release (db.Conn, QueryRowContext, Scan,
	// Close): the anchor's shape, one round trip of work per borrow.
	BenchCycleStatement = "cycleStatement"
	// BenchCycleParamStatement is cycleStatement with SELECT ? and one argument, no explicit
	// Prepare: go-sql-driver/mysql without interpolateParams makes database/sql prepare,
	// execute and close a statement each time; the pool's statement cache prepares once per
	// connection.
	BenchCycleParamStatement = "cycleParamStatement"
	// BenchCycleInsert is borrow, BEGIN, one INSERT into an AUTO_INCREMENT table, COMMIT,
	// release: the commonest OLTP write. Its INSERT generates an id, so LAST_INSERT_ID() (MySQL)
	// changes on every cycle.
	BenchCycleInsert = "cycleInsert"
	// BenchCycleInsertAutocommit is cycleInsert without the transaction: borrow, one autocommit
	// INSERT, release.
	BenchCycleInsertAutocommit = "cycleInsertAutocommit"
	// BenchContended is cycleStatement from many goroutines on a small pool, open loop: each
	// goroutine starts a request at fixed intervals whether or not the previous one was late,
	// and the acquire latency (until Borrow returns) is measured from the scheduled start, so
	// queueing behind a slow request is counted (no coordinated omission).
	BenchContended = "contended"
	// BenchSaturated is a closed loop with far more goroutines than connections (default 256
	// on a pool of 8), each borrower holding its connection for a set time with time.Sleep
	// (default 1 ms) and returning it. Every borrow but a few waits, so the order in which
	// waiters are served decides the tail: it reports the acquire latency (p50/p99/p99.9/max)
	// and the operations completed by the slowest and the median goroutine against the mean.
	BenchSaturated = "saturated"
)

// AllBenchmarks lists the benchmarks in their report order.
var AllBenchmarks = []string{BenchCycleConnection, BenchCycleStatement, BenchCycleParamStatement, BenchCycleInsert,
	BenchCycleInsertAutocommit, BenchContended, BenchSaturated}

// InsertTable is the AUTO_INCREMENT table (PostgreSQL: an identity column) the insert
// benchmarks write to; PrepareInsertTable creates it and empties it before each spec.
const InsertTable = "sqlpool_bench_insert"

// insertSQL is the insert benchmarks' statement: no parameter, so that every pool sends the
// same text (a parameter would make database/sql prepare it on each cycle and the pool's
// statement cache once per connection). Its value is 0, which no id is: a positive literal
// equal to the id the previous borrow generated (1 on the emptied table) costs the pool one
// reset before it (txstate's deferred LAST_INSERT_ID() reset), once per connection.
const insertSQL = "INSERT INTO " + InsertTable + " (v) VALUES (0)"

// isInsert reports whether benchmark name writes to InsertTable.
func isInsert(name string) bool {
	return name == BenchCycleInsert || name == BenchCycleInsertAutocommit
}

// CycleInsert borrows a connection, runs BEGIN, one INSERT and COMMIT, and returns it.
func CycleInsert(ctx context.Context, d *DB) error {
	c, err := d.Borrow(ctx)
	if err != nil {
		return err
	}
	tx, err := c.BeginTx(ctx, nil)
	if err == nil {
		if _, err = tx.ExecContext(ctx, insertSQL); err != nil {
			_ = tx.Rollback()
		} else {
			err = tx.Commit()
		}
	}
	if rerr := d.Return(ctx, c); err == nil {
		err = rerr
	}
	return err
}

// CycleInsertAutocommit borrows a connection, runs one autocommit INSERT and returns it.
func CycleInsertAutocommit(ctx context.Context, d *DB) error {
	c, err := d.Borrow(ctx)
	if err != nil {
		return err
	}
	_, err = c.ExecContext(ctx, insertSQL)
	if rerr := d.Return(ctx, c); err == nil {
		err = rerr
	}
	return err
}

// CycleConnection borrows a connection and returns it.
func CycleConnection(ctx context.Context, d *DB) error {
	c, err := d.Borrow(ctx)
	if err != nil {
		return err
	}
	return d.Return(ctx, c)
}

// CycleStatement borrows a connection, runs SELECT 1, scans the row and returns the connection.
func CycleStatement(ctx context.Context, d *DB) error {
	c, err := d.Borrow(ctx)
	if err != nil {
		return err
	}
	var n int64
	err = c.QueryRowContext(ctx, "SELECT 1").Scan(&n)
	if err == nil && n != 1 {
		err = fmt.Errorf("SELECT 1 returned %d", n)
	}
	if rerr := d.Return(ctx, c); err == nil {
		err = rerr
	}
	return err
}

// CycleParamStatement borrows a connection, runs SELECT ? with arg, scans it back and returns
// the connection.
func CycleParamStatement(ctx context.Context, d *DB, arg int64) error {
	c, err := d.Borrow(ctx)
	if err != nil {
		return err
	}
	q := d.paramSQL
	if q == "" {
		q = "SELECT ?"
	}
	var n int64
	err = c.QueryRowContext(ctx, q, arg).Scan(&n)
	if err == nil && n != arg {
		err = fmt.Errorf("SELECT ? with %d returned %d", arg, n)
	}
	if rerr := d.Return(ctx, c); err == nil {
		err = rerr
	}
	return err
}

// Contended is one request of the contended benchmark: CycleStatement, recording in h the
// acquire latency from sched (the request's scheduled start) to the end of Borrow.
func Contended(ctx context.Context, d *DB, sched time.Time, h *Histogram) error {
	c, err := d.Borrow(ctx)
	h.Record(int64(time.Since(sched)))
	if err != nil {
		return err
	}
	var n int64
	err = c.QueryRowContext(ctx, "SELECT 1").Scan(&n)
	if err == nil && n != 1 {
		err = fmt.Errorf("SELECT 1 returned %d", n)
	}
	if rerr := d.Return(ctx, c); err == nil {
		err = rerr
	}
	return err
}

// Saturated is one operation of the saturated benchmark: borrow (its latency recorded in h),
// hold the connection for hold without using it, return it.
func Saturated(ctx context.Context, d *DB, hold time.Duration, h *Histogram) error {
	start := time.Now()
	c, err := d.Borrow(ctx)
	h.Record(int64(time.Since(start)))
	if err != nil {
		return err
	}
	time.Sleep(hold)
	return d.Return(ctx, c)
}

// closedOp returns the closed-loop operation of benchmark name for goroutine g.
func closedOp(name string, d *DB, g int) (func(ctx context.Context) error, error) {
	switch name {
	case BenchCycleConnection:
		return func(ctx context.Context) error { return CycleConnection(ctx, d) }, nil
	case BenchCycleStatement:
		return func(ctx context.Context) error { return CycleStatement(ctx, d) }, nil
	case BenchCycleInsert:
		return func(ctx context.Context) error { return CycleInsert(ctx, d) }, nil
	case BenchCycleInsertAutocommit:
		return func(ctx context.Context) error { return CycleInsertAutocommit(ctx, d) }, nil
	case BenchCycleParamStatement:
		arg := int64(g) << 32
		return func(ctx context.Context) error {
			arg++
			return CycleParamStatement(ctx, d, arg)
		}, nil
	}
	return nil, fmt.Errorf("unknown benchmark %q", name)
}
