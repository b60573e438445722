package difftest

import (
	"context"
	"database/sql"
)

// OpenTx is the transaction a borrow has open, begun (by both sides alike) with a context that
// can end but does not while the program runs: database/sql rolls a transaction back when its
// context ends, so it is not the step's; and the pool commits a transaction begun with such a
// context through ExecContext with it (mysqldialect's Dialect.Commit), which the fuzzer thus compares.
type OpenTx struct {
	Tx  *sql.Tx // nil when none is open
	end context.CancelFunc
}

// Begin opens a transaction on c as st asks.
func (o *OpenTx) Begin(c *sql.Conn, st Step) error {
	ctx, end := context.WithCancel(context.Background())
	tx, err := c.BeginTx(ctx, &sql.TxOptions{Isolation: st.Iso, ReadOnly: st.ReadOnly})
	if err != nil {
		end()
		return err
	}
	o.Tx, o.end = tx, end
	return nil
}

// Finish commits or rolls back the open transaction and forgets it.
func (o *OpenTx) Finish(commit bool) error {
	var err error
	if commit {
		err = o.Tx.Commit()
	} else {
		err = o.Tx.Rollback()
	}
	o.forget()
	return err
}

// Abandon rolls back the open transaction, if any, ignoring the error.
func (o *OpenTx) Abandon() {
	if o.Tx != nil {
		_ = o.Tx.Rollback()
		o.forget()
	}
}

func (o *OpenTx) forget() {
	o.Tx = nil
	if o.end != nil {
		o.end()
		o.end = nil
	}
}
