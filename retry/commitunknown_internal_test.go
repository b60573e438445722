package retry

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"
)

// unknownCommit is an error like pool.CommitUnknownError: COMMIT was sent, then its context
// ended.
type unknownCommit struct{ err error }

func (e *unknownCommit) Error() string         { return "commit outcome unknown: " + e.err.Error() }
func (e *unknownCommit) Unwrap() error         { return e.err }
func (e *unknownCommit) AmbiguousCommit() bool { return true }

// A Commit error that says its outcome is unknown is Ambiguous although it matches the
// context's error; a bare context error from Commit (COMMIT not sent) stays Permanent.
func TestClassifyCommitUnknownOutcome(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	wrapped := fmt.Errorf("tx: %w", &unknownCommit{err: context.DeadlineExceeded})
	if _, c := classifyCommit(ctx, wrapped, false, nil); c != Ambiguous {
		t.Errorf("commit with unknown outcome: class %v, want Ambiguous", c)
	}
	if !errors.Is(wrapped, context.DeadlineExceeded) {
		t.Fatal("setup: the error must match the context's error")
	}
	if _, c := classifyCommit(ctx, context.DeadlineExceeded, false, nil); c != Permanent {
		t.Errorf("bare context error from Commit: class %v, want Permanent", c)
	}
}

// Classify, not only Tx's commit path, sees an unknown-outcome error as Ambiguous, although it
// wraps driver.ErrBadConn (lib/pq through the pool), which alone is Transient.
func TestClassifyUnknownOutcomeOutsideTx(t *testing.T) {
	err := fmt.Errorf("commit: %w", &unknownCommit{err: driver.ErrBadConn})
	if c := Classify(err); c != Ambiguous {
		t.Errorf("Classify(unknown outcome wrapping ErrBadConn) = %v, want Ambiguous", c)
	}
	if c := Classify(driver.ErrBadConn); c != Transient {
		t.Errorf("Classify(ErrBadConn) = %v, want Transient", c)
	}
}

// nilState and nilUnknown have methods that dereference their receiver, as pgx's and the
// pool's do, and an Error that does not.
type nilState struct{ code string }

func (e *nilState) Error() string    { return "an error with a SQLSTATE" }
func (e *nilState) SQLState() string { return e.code }

type nilUnknown struct{ unknown bool }

func (e *nilUnknown) Error() string         { return "an unknown-outcome error" }
func (e *nilUnknown) AmbiguousCommit() bool { return e.unknown }

// A typed nil in the chain (a nil *PgError, a nil CommitUnknownError) does not panic and says
// nothing.
func TestClassifyTypedNil(t *testing.T) {
	var st *nilState
	var uc *nilUnknown
	for _, err := range []error{fmt.Errorf("a: %w", st), fmt.Errorf("b: %w", uc), errors.Join(st, uc)} {
		if c := Classify(err); c != Permanent {
			t.Errorf("Classify(%v) = %v, want Permanent", err, c)
		}
		if _, c := classifyCommit(context.Background(), err, false, nil); c != Ambiguous {
			t.Errorf("classifyCommit(%v) = %v, want Ambiguous (an error it does not know)", err, c)
		}
	}
}
