package retry

import "time"

// Observer receives the events of Do and Tx, for metrics (package metrics
// implements it). Methods are called on the goroutine that called Do or Tx,
// synchronously, so they must be quick; they must not call Do or Tx with the
// same Observer in a way that recurses without end. attempt counts from 1.
type Observer interface {
	// Attempt reports that attempt number attempt of a call is starting.
	Attempt(op Op, attempt int)
	// Retry reports that attempt failed with the Transient err and that the
	// next attempt starts after delay (unless the ctx ends first).
	Retry(op Op, attempt int, err error, delay time.Duration)
	// BudgetExhausted reports that attempt failed with the Transient err and
	// that the budget refused another attempt.
	BudgetExhausted(op Op, attempt int, err error)
	// Ambiguous reports that attempt ended with an unknown outcome (a lost
	// COMMIT, 1180); err is the cause.
	Ambiguous(op Op, attempt int, err error)
	// Done reports the end of a call: the attempts made and the error
	// returned (nil on success; otherwise an *Error).
	Done(op Op, attempts int, err error)
}

// Hooks is an Observer made of optional functions; a nil field is skipped.
// Use it as Policy{Observer: &retry.Hooks{OnRetry: ...}}.
type Hooks struct {
	OnAttempt         func(op Op, attempt int)
	OnRetry           func(op Op, attempt int, err error, delay time.Duration)
	OnBudgetExhausted func(op Op, attempt int, err error)
	OnAmbiguous       func(op Op, attempt int, err error)
	OnDone            func(op Op, attempts int, err error)
}

// Attempt calls h.OnAttempt if it is set.
func (h *Hooks) Attempt(op Op, attempt int) {
	if h.OnAttempt != nil {
		h.OnAttempt(op, attempt)
	}
}

// Retry calls h.OnRetry if it is set.
func (h *Hooks) Retry(op Op, attempt int, err error, delay time.Duration) {
	if h.OnRetry != nil {
		h.OnRetry(op, attempt, err, delay)
	}
}

// BudgetExhausted calls h.OnBudgetExhausted if it is set.
func (h *Hooks) BudgetExhausted(op Op, attempt int, err error) {
	if h.OnBudgetExhausted != nil {
		h.OnBudgetExhausted(op, attempt, err)
	}
}

// Ambiguous calls h.OnAmbiguous if it is set.
func (h *Hooks) Ambiguous(op Op, attempt int, err error) {
	if h.OnAmbiguous != nil {
		h.OnAmbiguous(op, attempt, err)
	}
}

// Done calls h.OnDone if it is set.
func (h *Hooks) Done(op Op, attempts int, err error) {
	if h.OnDone != nil {
		h.OnDone(op, attempts, err)
	}
}
