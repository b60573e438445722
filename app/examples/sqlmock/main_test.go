package main

import (
	"context"
	"errors"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"
)

// The unit test a user writes for Transfer, with the pool in front of go-sqlmock.
func TestTransfer(t *testing.T) {
	p, db, mock, mockDB, err := NewMockPool("transfer-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mock.ExpectClose()
		_ = db.Close()
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		_ = mockDB.Close()
	})
	ctx := context.Background()

	mock.ExpectBegin()
	mock.ExpectExec("UPDATE accounts SET balance = balance - ? WHERE id = ?").WithArgs(25, 7).WillReturnResult(sqlmock.NewResult(0, 1))
	mock.ExpectExec("UPDATE accounts SET balance = balance + ? WHERE id = ?").WithArgs(25, 8).WillReturnError(errors.New("deadlock"))
	mock.ExpectRollback()
	if err := Transfer(ctx, db, 7, 8, 25); err == nil {
		t.Fatal("Transfer succeeded although the credit failed")
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}

// TestExample runs the example as `go run ./app/examples/sqlmock` does.
func TestExample(t *testing.T) {
	if err := run(); err != nil {
		t.Fatal(err)
	}
}
