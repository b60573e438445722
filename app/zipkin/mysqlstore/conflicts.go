package mysqlstore

import (
	"errors"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/retry"
)

// conflictObserver counts the lock conflicts of the write transactions —
// deadlocks (1213) and lock wait timeouts (1205) that retry.Tx ran again or
// gave up on — and passes every event on to the Observer of Options.Retry.
type conflictObserver struct {
	s    *Store
	next retry.Observer
}

func (o conflictObserver) count(err error) {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return
	}
	switch me.Number {
	case 1213:
		o.s.stats.deadlocks.Add(1)
	case 1205:
		o.s.stats.lockWaits.Add(1)
	}
}

func (o conflictObserver) Attempt(op retry.Op, attempt int) {
	if o.next != nil {
		o.next.Attempt(op, attempt)
	}
}

func (o conflictObserver) Retry(op retry.Op, attempt int, err error, delay time.Duration) {
	o.count(err)
	if o.next != nil {
		o.next.Retry(op, attempt, err, delay)
	}
}

func (o conflictObserver) BudgetExhausted(op retry.Op, attempt int, err error) {
	o.count(err)
	if o.next != nil {
		o.next.BudgetExhausted(op, attempt, err)
	}
}

func (o conflictObserver) Ambiguous(op retry.Op, attempt int, err error) {
	if o.next != nil {
		o.next.Ambiguous(op, attempt, err)
	}
}

func (o conflictObserver) Done(op retry.Op, attempts int, err error) {
	if err != nil && !errors.Is(err, retry.ErrAmbiguousCommit) {
		o.count(err) // the last attempt's conflict, not retried
	}
	if o.next != nil {
		o.next.Done(op, attempts, err)
	}
}

// writePolicy is Options.Retry with the conflict counter observing it.
func (s *Store) writePolicy() retry.Policy {
	p := s.opts.Retry
	p.Observer = conflictObserver{s: s, next: p.Observer}
	return p
}
