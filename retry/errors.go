package retry

import (
	"errors"
	"strconv"
	"strings"
)

var (
	// ErrAmbiguousCommit is matched (errors.Is) by the error Do and Tx return
	// when the outcome of the work is unknown: the connection was lost while
	// COMMIT was in flight, or the server answered 1180 (ER_ERROR_DURING_COMMIT).
	// The transaction may or may not have been committed; it is never
	// retried. Check the data, or make the work idempotent, before running
	// it again.
	ErrAmbiguousCommit = errors.New("retry: commit outcome unknown: the transaction may or may not have been committed")

	// ErrBudgetExhausted is matched (errors.Is) by the error Do and Tx return
	// when an attempt failed with a Transient error and the Policy's Budget
	// refused another attempt, because too many retries were made recently.
	ErrBudgetExhausted = errors.New("retry: retry budget exhausted")
)

// Op names the entry point that reports an event or an error: OpDo or OpTx.
type Op uint8

const (
	// OpDo is retry.Do.
	OpDo Op = iota
	// OpTx is retry.Tx.
	OpTx
)

// String returns "do" or "tx".
func (o Op) String() string {
	switch o {
	case OpDo:
		return "do"
	case OpTx:
		return "tx"
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Error is the error Do and Tx return when the work did not succeed: the
// last attempt's error, wrapped with the number of attempts made. errors.Is
// and errors.As reach Err (and CtxErr when set); errors.Is matches
// ErrAmbiguousCommit when Class is Ambiguous and ErrBudgetExhausted when
// BudgetExhausted is true.
type Error struct {
	// Op is the entry point that returned the error.
	Op Op
	// Attempts is how many times the work ran, the first included. It is 0
	// when the ctx had ended before the first attempt.
	Attempts int
	// Class is the class Do or Tx gave Err: Permanent (returned at once),
	// Transient (attempts, the budget or the ctx ran out) or Ambiguous.
	Class Class
	// Err is the last attempt's error, or the ctx error when Attempts is 0.
	Err error
	// BudgetExhausted reports that a Transient Err was not retried because
	// the Budget refused.
	BudgetExhausted bool
	// CtxErr is the ctx's error when the ctx ended during a wait between
	// attempts; nil otherwise.
	CtxErr error
}

// Error describes the outcome, the attempts and the last error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("retry: ")
	b.WriteString(e.Op.String())
	b.WriteString(": ")
	switch {
	case e.Attempts == 0:
		b.WriteString("not attempted: ")
	case e.Class == Ambiguous:
		b.WriteString("outcome unknown after ")
		writeAttempts(&b, e.Attempts)
		b.WriteString(", not retried: ")
	case e.CtxErr != nil:
		b.WriteString(e.CtxErr.Error())
		b.WriteString(" while waiting to retry after ")
		writeAttempts(&b, e.Attempts)
		b.WriteString("; last error: ")
	case e.BudgetExhausted:
		b.WriteString("retry budget exhausted after ")
		writeAttempts(&b, e.Attempts)
		b.WriteString(": ")
	case e.Class == Transient:
		b.WriteString("gave up after ")
		writeAttempts(&b, e.Attempts)
		b.WriteString(": ")
	default:
		b.WriteString("permanent error on attempt ")
		b.WriteString(strconv.Itoa(e.Attempts))
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("<nil>")
	}
	return b.String()
}

func writeAttempts(b *strings.Builder, n int) {
	b.WriteString(strconv.Itoa(n))
	if n == 1 {
		b.WriteString(" attempt")
	} else {
		b.WriteString(" attempts")
	}
}

// Unwrap returns Err, and CtxErr when it is set.
func (e *Error) Unwrap() []error {
	if e.CtxErr != nil {
		return []error{e.Err, e.CtxErr}
	}
	return []error{e.Err}
}

// Is reports whether target is ErrAmbiguousCommit and the outcome is
// ambiguous, or ErrBudgetExhausted and the budget refused a retry.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrAmbiguousCommit:
		return e.Class == Ambiguous
	case ErrBudgetExhausted:
		return e.BudgetExhausted
	}
	return false
}
