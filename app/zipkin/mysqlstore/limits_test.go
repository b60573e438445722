package mysqlstore_test

import (
	"math"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// GetDependencies with a window past year 9999 (and one reaching before
// year 1000) answers no links and no error on every server: the embedded
// server used to fail with "Incorrect datetime value: '10000-01-01'"
// where MariaDB answers nothing. Spans stored now are still found by a
// window that ends far in the future and reaches back to them.
func TestDependenciesWindowPastDateRange(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		s, _ := newStore(t, srv)
		ctx := ctxT(t)
		now := time.Now()
		trace := model.TraceID{Low: 0x77}
		client := &model.Endpoint{ServiceName: "front"}
		server := &model.Endpoint{ServiceName: "back"}
		if err := s.Accept(ctx, []model.Span{
			{TraceID: trace, ID: 1, Name: "get", Kind: model.KindClient, Timestamp: now.UnixMicro(), Duration: 10, LocalEndpoint: client},
			{TraceID: trace, ID: 1, Name: "get", Kind: model.KindServer, Shared: true, Timestamp: now.UnixMicro() + 1, Duration: 5, LocalEndpoint: server},
		}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			endTs, lookback int64
			links           int
		}{
			{253402300800000, 86400000, 0},                                          // 10000-01-01, one day back: the request
			{math.MaxInt64, 86400000, 0},                                            // the largest endTs
			{math.MaxInt64, math.MaxInt64, 1},                                       // every day that can exist
			{253402300800000, 253402300800000, 1},                                   // back to 1970
			{now.UnixMilli() + 1000, math.MaxInt64 - now.UnixMilli() - 1000 + 1, 1}, // before year 1000
		} {
			links, err := s.GetDependencies(ctx, c.endTs, c.lookback)
			if err != nil {
				t.Errorf("GetDependencies(%d, %d): %v", c.endTs, c.lookback, err)
				continue
			}
			if len(links) != c.links {
				t.Errorf("GetDependencies(%d, %d) = %v, want %d links", c.endTs, c.lookback, links, c.links)
			}
		}
	})
}
