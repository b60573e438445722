package main

import (
	"context"
	"database/sql"
	"fmt"
)

// Transfer is the application code under test: it moves amount from one account to another in
// one transaction. It knows nothing of the pool or of go-sqlmock.
func Transfer(ctx context.Context, db *sql.DB, from, to int64, amount int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - ? WHERE id = ?", amount, from); err != nil {
		return fmt.Errorf("debit %d: %w", from, err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + ? WHERE id = ?", amount, to); err != nil {
		return fmt.Errorf("credit %d: %w", to, err)
	}
	return tx.Commit()
}
