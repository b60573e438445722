package pool

import (
	"context"
	"database/sql/driver"
	"testing"
)

// Observing rows costs no allocation on the common path: a query and its rows through a
// borrow's conn allocate exactly what the driver's own call allocates (the conn's reusable rows
// wrapper). Issue 10, defect 4; DESIGN's hot-path invariant.
func TestRowsObservedWithoutAllocation(t *testing.T) {
	p, fc := newPool(t, Config{MaxConns: 1})
	c := mustConnect(t, p)
	defer c.Close()
	dc := fc.Conns()[0]
	ctx := context.Background()
	query := func(q driver.QueryerContext) func() {
		return func() {
			r, err := q.QueryContext(ctx, "SELECT 1", nil)
			if err != nil {
				t.Fatal(err)
			}
			dest := make([]driver.Value, 1)
			_ = r.Next(dest)
			_ = r.Close()
		}
	}
	direct := testing.AllocsPerRun(500, query(dc))
	pooled := testing.AllocsPerRun(500, query(c))
	if pooled > direct {
		t.Fatalf("a query through the pool allocates %.0f times, the driver alone %.0f", pooled, direct)
	}
	if _, ok := mustQuery(t, c).(*rows); !ok {
		t.Fatal("the pool's rows are not wrapped: nothing observes their errors")
	}
}

func mustQuery(t *testing.T, c *conn) driver.Rows {
	t.Helper()
	r, err := c.QueryContext(context.Background(), "SELECT 1", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}
