package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/retry"
)

// retryResults are the result label values of sqlpool_retry_calls_total.
var retryResults = [...]string{"ok", "permanent", "transient", "budget_exhausted", "ambiguous", "canceled"}

const (
	resultOK = iota
	resultPermanent
	resultTransient
	resultBudget
	resultAmbiguous
	resultCanceled
)

// retryOps are the op label values, indexed by retry.Op.
var retryOps = [...]retry.Op{retry.OpDo, retry.OpTx}

// retryObserver returns the pool's observer, made once.
func (pm *poolMetrics) retryObserver(m *Metrics) *retryObserver {
	pm.retryOnce.Do(func() { pm.retry = m.RetryObserver(pm.name).(*retryObserver) })
	return pm.retry
}

// RetryObserver returns a retry.Observer that counts the attempts, retries, budget refusals,
// ambiguous outcomes and final results of retry.Do and retry.Tx under the label pool=name.
// A pool whose Config.Trace is m.Trace() needs none for retry.Tx on its DB, which finds the
// pool's own; for retry.Do and retry.TxWith, which do not know the pool, use it as
// retry.Policy{Observer: m.RetryObserver("main")}. Its methods take no lock and allocate
// nothing.
func (m *Metrics) RetryObserver(name string) retry.Observer {
	o := &retryObserver{m: m, pool: name}
	for i, op := range retryOps {
		l := op.String()
		o.attempts[i] = m.retryAttempts.WithLabelValues(name, l)
		o.retries[i] = m.retries.WithLabelValues(name, l)
		o.budget[i] = m.retryBudget.WithLabelValues(name, l)
		o.ambiguous[i] = m.retryAmbiguous.WithLabelValues(name, l)
		for j, r := range retryResults {
			o.calls[i][j] = m.retryCalls.WithLabelValues(name, l, r)
		}
	}
	return o
}

type retryObserver struct {
	m                                    *Metrics
	pool                                 string
	attempts, retries, budget, ambiguous [len(retryOps)]prometheus.Counter
	calls                                [len(retryOps)][len(retryResults)]prometheus.Counter
}

var _ retry.Observer = (*retryObserver)(nil)

// counter returns arr[op], or the op's child looked up by label for an op this package does
// not know yet.
func (o *retryObserver) counter(arr *[len(retryOps)]prometheus.Counter, vec *prometheus.CounterVec, op retry.Op) prometheus.Counter {
	if int(op) < len(arr) && retryOps[op] == op {
		return arr[op]
	}
	return vec.WithLabelValues(o.pool, op.String())
}

// Attempt implements retry.Observer.
func (o *retryObserver) Attempt(op retry.Op, _ int) {
	o.counter(&o.attempts, o.m.retryAttempts, op).Inc()
}

// Retry implements retry.Observer.
func (o *retryObserver) Retry(op retry.Op, _ int, _ error, _ time.Duration) {
	o.counter(&o.retries, o.m.retries, op).Inc()
}

// BudgetExhausted implements retry.Observer.
func (o *retryObserver) BudgetExhausted(op retry.Op, _ int, _ error) {
	o.counter(&o.budget, o.m.retryBudget, op).Inc()
}

// Ambiguous implements retry.Observer.
func (o *retryObserver) Ambiguous(op retry.Op, _ int, _ error) {
	o.counter(&o.ambiguous, o.m.retryAmbiguous, op).Inc()
}

// Done implements retry.Observer.
func (o *retryObserver) Done(op retry.Op, _ int, err error) {
	r := retryResult(err)
	if int(op) < len(o.calls) && retryOps[op] == op {
		o.calls[op][r].Inc()
		return
	}
	o.m.retryCalls.WithLabelValues(o.pool, op.String(), retryResults[r]).Inc()
}

func retryResult(err error) int {
	if err == nil {
		return resultOK
	}
	e, ok := err.(*retry.Error)
	if !ok {
		return resultPermanent
	}
	switch {
	case e.Class == retry.Ambiguous:
		return resultAmbiguous
	case e.BudgetExhausted:
		return resultBudget
	case e.CtxErr != nil || e.Attempts == 0 ||
		errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded):
		return resultCanceled
	case e.Class == retry.Transient:
		return resultTransient
	}
	return resultPermanent
}
