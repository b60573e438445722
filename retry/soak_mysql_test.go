package retry_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/txsoak"
)

// envSoakSeconds sets how long TestTxSoakExactAccountingMariaDB runs (default 4 s, 1 s with
// -short).
const envSoakSeconds = "SQLPOOL_MYSQL_SOAK_SECONDS"

// TestTxSoakExactAccountingMariaDB is internal/txsoak's fault soak on MariaDB: 8 goroutines run
// retry.Tx transactions on a pool of 4 (InnoDB, REPEATABLE READ: the counters' updates in
// random order make deadlocks, 1213) while one of the pool's connections is killed every
// 10–60 ms (KILL CONNECTION), whatever it is doing. Every transaction is accounted for against
// the tables.
func TestTxSoakExactAccountingMariaDB(t *testing.T) {
	mysqltest.RequireMariaDB(t, "KILL CONNECTION under load on a real server")
	dur := txsoak.Duration(t, envSoakSeconds, 4*time.Second)
	dsn := mysqltest.DSN(t)
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// A database of its own: the killer picks the pool's connections by it.
	name := fmt.Sprintf("sqlpool_soak_%d", time.Now().UnixNano())
	mustExec(t, admin, "CREATE DATABASE "+name)
	defer mustExec(t, admin, "DROP DATABASE "+name)
	mustExec(t, admin, "CREATE TABLE "+name+".log (worker INT, seq INT, PRIMARY KEY (worker, seq)) ENGINE=InnoDB")
	mustExec(t, admin, "CREATE TABLE "+name+".counter (id INT PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB")
	mustExec(t, admin, "INSERT INTO "+name+".counter VALUES (0, 0), (1, 0), (2, 0), (3, 0)")
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	db := mysqlDB(t, cfg.FormatDSN(), 4, nil)
	txsoak.Run(t, txsoak.Config{
		DB: db, Admin: admin, Duration: dur,
		Insert: "INSERT INTO log (worker, seq) VALUES (?, ?)",
		Bump:   "UPDATE counter SET n = n + 1 WHERE id = ?",
		Rows:   "SELECT worker, seq FROM " + name + ".log",
		Sum:    "SELECT SUM(n) FROM " + name + ".counter",
		Kill: func(ctx context.Context) (int, error) {
			var id int64
			err := admin.QueryRowContext(ctx, "SELECT id FROM information_schema.PROCESSLIST WHERE db = ? ORDER BY RAND() LIMIT 1", name).Scan(&id)
			if errors.Is(err, sql.ErrNoRows) {
				return 0, nil // between two connections
			}
			if err != nil {
				return 0, err
			}
			_, err = admin.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
			if me, ok := errors.AsType[*mysql.MySQLError](err); ok && me.Number == 1094 {
				return 0, nil // gone meanwhile (unknown thread id)
			}
			if err != nil {
				return 0, err
			}
			return 1, nil
		},
		Kind: func(err error) string {
			if me, ok := errors.AsType[*mysql.MySQLError](err); ok {
				return strconv.Itoa(int(me.Number))
			}
			if errors.Is(err, mysql.ErrInvalidConn) {
				return "ErrInvalidConn"
			}
			return fmt.Sprintf("%T", err)
		},
	}).Check(t)
}
