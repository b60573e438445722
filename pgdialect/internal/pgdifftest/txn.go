package pgdifftest

// A copy of internal/difftest's openTx (txn.go), which pg.go uses as the MySQL runner does.

import (
	"context"
	"database/sql"

	"github.com/sqlpool/sqlpool/internal/difftest"
)

// openTx is the transaction a borrow has open, begun (by both sides alike) with a context that
// can end but does not while the program runs: database/sql rolls a transaction back when its
// context ends, so it is not the step's; and the pool commits a transaction begun with such a
// context through ExecContext with it (mysqldialect's Dialect.Commit), which the fuzzer thus compares.
type openTx struct {
	tx  *sql.Tx
	end context.CancelFunc
}

// begin opens a transaction on c as st asks.
func (o *openTx) begin(c *sql.Conn, st difftest.Step) error {
	ctx, end := context.WithCancel(context.Background())
	tx, err := c.BeginTx(ctx, &sql.TxOptions{Isolation: st.Iso, ReadOnly: st.ReadOnly})
	if err != nil {
		end()
		return err
	}
	o.tx, o.end = tx, end
	return nil
}

// finish commits or rolls back the open transaction and forgets it.
func (o *openTx) finish(commit bool) error {
	var err error
	if commit {
		err = o.tx.Commit()
	} else {
		err = o.tx.Rollback()
	}
	o.forget()
	return err
}

// abandon rolls back the open transaction, if any, ignoring the error.
func (o *openTx) abandon() {
	if o.tx != nil {
		_ = o.tx.Rollback()
		o.forget()
	}
}

func (o *openTx) forget() {
	o.tx = nil
	if o.end != nil {
		o.end()
		o.end = nil
	}
}
