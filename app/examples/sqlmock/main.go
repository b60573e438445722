// Command sqlmock shows how to unit-test code that uses sqlpool with go-sqlmock
// (github.com/DATA-DOG/go-sqlmock) through package sqlmockpool
// (github.com/sqlpool/sqlpool/sqlmockpool): the pool wraps go-sqlmock's connection, and the
// test expects every statement the application sends plus the ones the pool sends — its
// baseline query after opening a connection (sqlmockpool expects it), and its release plan (a
// ROLLBACK, resets) when a borrower leaves something behind (ExpectRelease). A clean borrow
// sends nothing. main_test.go is the unit test; this command runs the same steps and prints
// what happened.
//
//	go run ./app/examples/sqlmock
//	go test ./app/examples/sqlmock
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlpool/sqlpool/sqlmockpool"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sqlmock example:", err)
		os.Exit(1)
	}
}

func run() error {
	mp, err := sqlmockpool.Open(sqlmockpool.Options{})
	if err != nil {
		return err
	}
	defer mp.Close()
	db, mock := mp.DB, mp.Mock
	ctx := context.Background()

	// A transfer that commits: the pool adds nothing.
	mock.ExpectBegin()
	mock.ExpectExec("UPDATE accounts SET balance = balance - ? WHERE id = ?").WithArgs(10, 1).WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectExec("UPDATE accounts SET balance = balance + ? WHERE id = ?").WithArgs(10, 2).WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectCommit()
	if err := Transfer(ctx, db, 1, 2, 10); err != nil {
		return err
	}
	if err := mp.ExpectationsWereMet(); err != nil {
		return err
	}
	fmt.Println("transfer committed; the pool sent nothing of its own")

	// A transfer whose credit fails: Transfer rolls back, and the pool has nothing to clean.
	mock.ExpectBegin()
	mock.ExpectExec("UPDATE accounts SET balance = balance - ? WHERE id = ?").WithArgs(10, 1).WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectExec("UPDATE accounts SET balance = balance + ? WHERE id = ?").WithArgs(10, 3).WillReturnError(errors.New("no such account"))
	mock.ExpectRollback()
	if err := Transfer(ctx, db, 1, 3, 10); err == nil {
		return errors.New("the failing transfer succeeded")
	}
	if err := mp.ExpectationsWereMet(); err != nil {
		return err
	}
	fmt.Println("transfer rolled back by the application")

	// A borrower that leaves autocommit off: the pool rolls back and resets it on release.
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	mock.ExpectExec("SET autocommit = 0").WillReturnResult(sqlmock.NewResult(0, 0))
	mock.ExpectExec("DELETE FROM sessions").WillReturnResult(sqlmock.NewResult(0, 3))
	mp.ExpectRelease("ROLLBACK", "SET autocommit=1")
	if _, err := conn.ExecContext(ctx, "SET autocommit = 0"); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "DELETE FROM sessions"); err != nil {
		return err
	}
	if err := conn.Close(); err != nil {
		return err
	}
	if err := mp.ExpectationsWereMet(); err != nil {
		return err
	}
	fmt.Println("left autocommit off; the pool sent ROLLBACK and SET autocommit=1")
	return mp.Close()
}
