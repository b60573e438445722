package mysqlstore_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// Accept calls that arrive while every write slot is taken are written
// together in one transaction when a slot frees, and store exactly what
// the same calls store one after another: each call returns its own
// invalid spans, and the rows and dependency links are the same.
func TestConcurrentAcceptsShareATransaction(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		ctx := ctxT(t)
		open := func(opts mysqlstore.Options) (*mysqlstore.Store, func(q string) []string) {
			db := openPlain(t, freshDatabase(t, srv.dsn))
			if err := mysqlstore.CreateSchema(ctx, db); err != nil {
				t.Fatalf("CreateSchema: %v", err)
			}
			opts.Logger, opts.DependencyFoldInterval = quietLogger, -1
			s, err := mysqlstore.Open(ctx, db, opts)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s, func(q string) []string { return dump(t, db, q) }
		}
		const calls = 8
		batches := make([][]model.Span, calls)
		for i := range batches {
			batches[i] = testSpans(uint64(100+i), 10)
		}
		batches[3][4].ID = 0 // invalid: Accept names it, stores the rest

		grouped, groupedRows := open(mysqlstore.Options{ConcurrentWrites: 1})
		release, queued := mysqlstore.HoldWriteSlots(grouped, 1)
		errs := make([]error, calls)
		var wg sync.WaitGroup
		for i := range batches {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = grouped.Accept(ctx, batches[i]) }()
		}
		deadline := time.Now().Add(time.Minute)
		for queued() < calls {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d calls queued", queued(), calls)
			}
			time.Sleep(time.Millisecond)
		}
		release()
		wg.Wait()

		one, oneRows := open(mysqlstore.Options{ConcurrentWrites: -1})
		for i := range batches {
			err := one.Accept(ctx, batches[i])
			var inv *mysqlstore.InvalidSpansError
			if gotInv := errors.As(errs[i], &inv); gotInv != (i == 3) || (gotInv && (len(inv.Spans) != 1 || inv.Spans[0].Index != 4)) {
				t.Errorf("call %d: %v", i, errs[i])
			}
			if (err == nil) != (errs[i] == nil) {
				t.Errorf("call %d: %v alone, %v grouped", i, err, errs[i])
			}
		}
		if q := groupedRows("SELECT COUNT(*) FROM zipkin_dependency_queue"); q[0] != "1" {
			t.Errorf("%s write transactions queued for the aggregator, want the 8 calls in 1", q[0])
		}
		if st := grouped.Stats(); st.Batches != calls || st.Spans != calls*10-1 || st.Rejected != 1 {
			t.Errorf("stats %+v, want %d batches, %d spans, 1 rejected", st, calls, calls*10-1)
		}
		for _, q := range []string{
			"SELECT * FROM zipkin_spans ORDER BY trace_id_high, trace_id, id",
			"SELECT * FROM zipkin_annotations ORDER BY trace_id_high, trace_id, span_id, a_key, a_timestamp",
		} {
			checkRows(t, q, groupedRows(q), oneRows(q))
		}
		end, lookback := int64(1_800_000_000_000), int64(200_000_000_000)
		a, err1 := grouped.GetDependencies(ctx, end, lookback)
		b, err2 := one.GetDependencies(ctx, end, lookback)
		if err1 != nil || err2 != nil || linkString(a) != linkString(b) || len(a) == 0 {
			t.Errorf("dependencies grouped %v (%v), alone %v (%v)", a, err1, b, err2)
		}
	})
}
