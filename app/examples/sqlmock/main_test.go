package main

import (
	"context"
	"errors"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlpool/sqlpool/sqlmockpool"
)

// The unit test a user writes for Transfer, with the pool in front of go-sqlmock. The test also
// fails, when it ends, if the pool sent a statement it did not expect.
func TestTransfer(t *testing.T) {
	mp := sqlmockpool.New(t, sqlmockpool.Options{})
	mp.Mock.ExpectBegin()
	mp.Mock.ExpectExec("UPDATE accounts SET balance = balance - ? WHERE id = ?").WithArgs(25, 7).WillReturnResult(sqlmock.NewResult(0, 1))
	mp.Mock.ExpectExec("UPDATE accounts SET balance = balance + ? WHERE id = ?").WithArgs(25, 8).WillReturnError(errors.New("deadlock"))
	mp.Mock.ExpectRollback()
	if err := Transfer(context.Background(), mp.DB, 7, 8, 25); err == nil {
		t.Fatal("Transfer succeeded although the credit failed")
	}
	if err := mp.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}

// TestExample runs the example as `go run ./app/examples/sqlmock` does.
func TestExample(t *testing.T) {
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
