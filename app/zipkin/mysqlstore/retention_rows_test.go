package mysqlstore_test

import (
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// When every span is older than the cutoff by more than a day, a retention
// pass leaves no row in any table of the store: spans, annotations, the
// service and autocomplete indexes, the dependency aggregator's queue,
// trace records, hour and day counts. Writes still queued for the
// aggregator when the pass starts are folded first, so no count of an
// expired hour comes back after the pass. Only zipkin_names (the
// vocabulary of service and span names, which no span row references) is
// kept.
func TestRetentionLeavesNoRowOfExpiredData(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		ctx := ctxT(t)
		db := openPlain(t, freshDatabase(t, srv.dsn))
		if err := mysqlstore.CreateSchema(ctx, db); err != nil {
			t.Fatalf("CreateSchema: %v", err)
		}
		s, err := mysqlstore.Open(ctx, db, mysqlstore.Options{Logger: quietLogger, AutocompleteKeys: []string{"http.path"}})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		old := now.Add(-72 * time.Hour).UnixMicro()
		for i := 0; i < 6; i++ {
			tr := retentionTrace(old+int64(i)*int64(time.Hour/time.Microsecond), 4)
			// A server span of the backend under the first client span,
			// so that the trace links frontend → backend.
			srvSpan := tr[1]
			srvSpan.ID, srvSpan.ParentID, srvSpan.Kind = tr[1].ID, tr[0].ID, model.KindServer
			srvSpan.Shared = true
			srvSpan.LocalEndpoint, srvSpan.RemoteEndpoint = tr[1].RemoteEndpoint, nil
			tr = append(tr, srvSpan)
			if err := s.Accept(ctx, tr); err != nil {
				t.Fatalf("Accept: %v", err)
			}
			if i == 2 {
				// Half the writes counted, half still queued.
				if _, err := s.FoldDependencies(ctx); err != nil {
					t.Fatalf("FoldDependencies: %v", err)
				}
			}
		}
		links, err := s.GetDependencies(ctx, now.UnixMilli(), (96 * time.Hour).Milliseconds())
		if err != nil || len(links) == 0 {
			t.Fatalf("setup: dependencies %v, %v; want links", links, err)
		}
		var tables []string
		rows, err := db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY 1")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var tb string
			if err := rows.Scan(&tb); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, tb)
		}
		if err := rows.Close(); err != nil || len(tables) < 8 {
			t.Fatalf("tables %v, %v", tables, err)
		}
		counts := func() map[string]int64 {
			m := map[string]int64{}
			for _, tb := range tables {
				m[tb] = scalar(t, db, "SELECT COUNT(*) FROM "+tb)
			}
			return m
		}
		t.Logf("rows before the pass: %v", counts())

		r, err := s.NewRetention(mysqlstore.RetentionOptions{MaxAge: time.Hour, BatchSpans: 7, Pause: -1,
			Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.DeleteBefore(ctx, now.Add(-time.Hour)); err != nil {
			t.Fatalf("DeleteBefore: %v", err)
		}
		// A drain after the pass brings nothing back.
		if _, err := s.FoldDependencies(ctx); err != nil {
			t.Fatalf("FoldDependencies: %v", err)
		}
		for tb, n := range counts() {
			if n != 0 && tb != "zipkin_names" {
				t.Errorf("%s: %d rows left after retention removed every span", tb, n)
			}
		}
		if links, err := s.GetDependencies(ctx, now.UnixMilli(), (96 * time.Hour).Milliseconds()); err != nil || len(links) != 0 {
			t.Errorf("dependencies after retention: %v, %v; want none", links, err)
		}
	})
}
