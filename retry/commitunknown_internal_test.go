package retry

import (
	"context"
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
	if _, c := classifyCommit(ctx, wrapped, false); c != Ambiguous {
		t.Errorf("commit with unknown outcome: class %v, want Ambiguous", c)
	}
	if !errors.Is(wrapped, context.DeadlineExceeded) {
		t.Fatal("setup: the error must match the context's error")
	}
	if _, c := classifyCommit(ctx, context.DeadlineExceeded, false); c != Permanent {
		t.Errorf("bare context error from Commit: class %v, want Permanent", c)
	}
}
