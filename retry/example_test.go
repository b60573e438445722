package retry_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/mysqldialect"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// exampleDB starts the embedded MySQL-protocol server and returns a DB in
// front of a pool, and a function that closes everything.
func exampleDB() (*sql.DB, func()) {
	dsn, stop, err := mysqltest.StartEmbedded()
	if err != nil {
		panic(err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		panic(err)
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		panic(err)
	}
	p, err := pool.New(connector, pool.Config{Name: "example", MaxConns: 2, Logger: quietLog})
	if err != nil {
		panic(err)
	}
	db := p.OpenDB()
	return db, func() { _ = db.Close(); _ = p.Close(); _ = stop() }
}

func ExampleTx() {
	db, done := exampleDB()
	defer done()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE accounts (id INT PRIMARY KEY, balance INT NOT NULL)"); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO accounts VALUES (1, 100), (2, 0)"); err != nil {
		fmt.Println(err)
		return
	}

	policy := retry.Policy{ // zero fields: 3 attempts, 10 ms..1 s full-jitter backoff, the shared budget
		Observer: &retry.Hooks{OnRetry: func(op retry.Op, attempt int, err error, wait time.Duration) {
			fmt.Printf("attempt %d: %v error, running the transaction again\n", attempt, retry.Classify(err))
		}},
	}
	attempt := 0
	err := retry.Tx(ctx, db, nil, policy, func(ctx context.Context, tx *sql.Tx) error {
		attempt++
		if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - 30 WHERE id = 1"); err != nil {
			return err
		}
		if attempt == 1 {
			// What InnoDB answers when it picks this transaction as a
			// deadlock victim (it rolls the whole transaction back).
			return &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}
		}
		_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + 30 WHERE id = 2")
		return err
	})
	if errors.Is(err, retry.ErrAmbiguousCommit) {
		fmt.Println("the transfer may or may not have happened; check before trying again:", err)
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	var a, b int
	if err := db.QueryRowContext(ctx, "SELECT (SELECT balance FROM accounts WHERE id = 1), (SELECT balance FROM accounts WHERE id = 2)").Scan(&a, &b); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("committed on attempt %d: balances %d and %d\n", attempt, a, b)
	// Output:
	// attempt 1: transient error, running the transaction again
	// committed on attempt 2: balances 70 and 30
}

func ExampleDo() {
	db, done := exampleDB()
	defer done()
	ctx := context.Background()

	// A read is idempotent, so Do may run it again whatever happened.
	var n int
	calls := 0
	err := retry.Do(ctx, retry.Policy{}, func(ctx context.Context) error {
		calls++
		if calls == 1 {
			// The connection was found dead before anything was sent.
			return driver.ErrBadConn
		}
		return db.QueryRowContext(ctx, "SELECT 6 * 7").Scan(&n)
	})
	fmt.Println(n, err, calls)
	// Output: 42 <nil> 2
}

func ExampleClassify() {
	for _, err := range []error{
		&mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"},
		&mysql.MySQLError{Number: 1180, Message: "Got error 4 during COMMIT"},
		&mysql.MySQLError{Number: 1062, Message: "Duplicate entry '1' for key 'PRIMARY'"},
		fmt.Errorf("insert: %w", context.DeadlineExceeded),
	} {
		fmt.Println(retry.Classify(err))
	}
	// Output:
	// transient
	// ambiguous
	// permanent
	// permanent
}

func ExampleNewBudget() {
	// One budget per database: its retries stay within a fifth of its calls
	// over the last 10 s, plus 10 a second (100 per window) for a quiet
	// process.
	spans := retry.NewBudget(retry.BudgetConfig{}) // the defaults
	policy := retry.Policy{Budget: spans}
	fmt.Printf("%+v, %d retries available\n", spans.Config(), spans.Balance())
	_ = policy
	// Output: {Window:10s MinRetriesPerSec:10 Ratio:0.2}, 100 retries available
}

// orders is an application's own transaction type: the queries of one
// transaction, over a *sql.Tx. TxWith runs transactions of such a type as Tx
// runs a *sql.Tx (sqlx's *sqlx.Tx works the same way, with db.BeginTxx as
// the begin function).
type orders struct{ *sql.Tx }

func (o orders) place(ctx context.Context, id, qty int) error {
	_, err := o.ExecContext(ctx, "INSERT INTO orders VALUES (?, ?)", id, qty)
	return err
}

func ExampleTxWith() {
	db, done := exampleDB()
	defer done()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id INT PRIMARY KEY, qty INT NOT NULL)"); err != nil {
		fmt.Println(err)
		return
	}
	begin := func(ctx context.Context, opts *sql.TxOptions) (orders, error) {
		tx, err := db.BeginTx(ctx, opts)
		return orders{tx}, err
	}
	attempt := 0
	err := retry.TxWith(ctx, begin, nil, retry.Policy{}, func(ctx context.Context, o orders) error {
		attempt++
		if err := o.place(ctx, 1, 5); err != nil {
			return err
		}
		if attempt == 1 {
			// A lock wait timeout: only the statement was rolled back;
			// TxWith rolls back the rest and runs the transaction again.
			return &mysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded; try restarting transaction"}
		}
		return o.place(ctx, 2, 7)
	})
	var n int
	if err == nil {
		err = db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders").Scan(&n)
	}
	fmt.Println(err, attempt, n)
	// Output: <nil> 2 2
}

// mysqlGroupReplication is MySQL's dialect taught that 3101 (the transaction
// was rolled back at COMMIT by a Group Replication certification conflict)
// is worth another try. Set as pool.Config.Dialect and as Policy.Dialect,
// the pool and retry read errors the same way.
type mysqlGroupReplication struct{ pool.Dialect }

func (d mysqlGroupReplication) Classify(err error, s pool.ErrorContext) pool.ErrorClass {
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok && me.Number == 3101 {
		return pool.ErrorClass{Transient: true}
	}
	return d.Dialect.Classify(err, s)
}

func ExamplePolicy_Classify() {
	policy := retry.Policy{Dialect: mysqlGroupReplication{mysqldialect.Dialect}}
	for _, err := range []error{
		&mysql.MySQLError{Number: 3101, Message: "Plugin instructed the server to rollback the current transaction."},
		&mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"},
		&mysql.MySQLError{Number: 1062, Message: "Duplicate entry '1' for key 'PRIMARY'"},
	} {
		fmt.Println(retry.Classify(err), policy.Classify(err))
	}
	// Output:
	// permanent transient
	// transient transient
	// permanent permanent
}

func ExampleTx_conn() {
	db, done := exampleDB()
	defer done()
	ctx := context.Background()
	// Tx begins on anything with BeginTx: here one *sql.Conn, whose session
	// (a variable set on it) every attempt sees.
	conn, err := db.Conn(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET @tenant = 42"); err != nil {
		fmt.Println(err)
		return
	}
	var tenant int
	err = retry.Tx(ctx, conn, nil, retry.Policy{}, func(ctx context.Context, tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, "SELECT @tenant").Scan(&tenant)
	})
	fmt.Println(tenant, err)
	// Output: 42 <nil>
}
