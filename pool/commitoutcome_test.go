package pool

import (
	"context"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/sqlpool/sqlpool/internal/fakedb"
)

// outcomeDialect is MySQL's dialect whose Commit calls driver.ErrBadConn from the driver's
// Commit unknown, as pgdialect does for lib/pq.
type outcomeDialect struct{ Dialect }

func (d outcomeDialect) Commit(ctx context.Context, dc driver.Conn, t driver.Tx) error {
	err := d.Dialect.Commit(ctx, dc, t)
	if errors.Is(err, driver.ErrBadConn) {
		err = &CommitUnknownError{Err: err, Reason: "the driver's error does not tell whether COMMIT reached the server"}
	}
	return err
}

// A COMMIT error the dialect calls unknown reaches the caller as a CommitUnknownError that
// still matches driver.ErrBadConn (database/sql then discards the connection); without the
// dialect's say, or for any other error, the driver's error is returned as it is.
func TestCommitOutcomeUnknown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dialect Dialect
		err     error
		unknown bool
	}{
		{"dialect says unknown", outcomeDialect{mysqlDialect(t)}, driver.ErrBadConn, true},
		{"another error", outcomeDialect{mysqlDialect(t)}, errors.New("23505 at commit"), false},
		{"MySQL's Commit", mysqlDialect(t), driver.ErrBadConn, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := fakedb.New()
			p, _ := newPoolOver(t, fc, Config{MaxConns: 1, Dialect: tc.dialect})
			db := p.OpenDB()
			defer db.Close()
			tx, err := db.BeginTx(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			fc.Conns()[0].FailNext(tc.err)
			err = tx.Commit()
			var cu *CommitUnknownError
			if got := errors.As(err, &cu); got != tc.unknown {
				t.Fatalf("Commit: %v; CommitUnknownError %v, want %v", err, got, tc.unknown)
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("Commit: %v does not match the driver's %v", err, tc.err)
			}
			if tc.unknown && (cu.Reason == "" || !cu.AmbiguousCommit()) {
				t.Fatalf("CommitUnknownError without a reason: %v", cu)
			}
		})
	}
}
