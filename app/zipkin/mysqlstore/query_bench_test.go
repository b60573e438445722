package mysqlstore_test

import (
	"database/sql"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// BenchmarkGetTraces measures getTraces (both steps: trace IDs, then spans
// and annotations of 10 traces of 4 spans) on MariaDB, through the sqlpool
// pool (p.OpenDB(), statement cache on) and through plain database/sql over
// the same driver. Run it with MYSQL_TEST_DSN set; see docs/design/zipkin.md.
func BenchmarkGetTraces(b *testing.B) {
	mysqltest.RequireMariaDB(b, "the getTraces benchmark compares pools on MariaDB")
	dsn := freshDatabaseB(b, mysqltest.DSN(b))
	setup := openPlain(b, dsn)
	if err := mysqlstore.CreateSchema(ctxBG, setup); err != nil {
		b.Fatal(err)
	}
	w, err := mysqlstore.Open(ctxBG, setup, mysqlstore.Options{Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	var spans []model.Span
	for i := 0; i < 1000; i++ {
		tr := newStdTrace()
		for _, sp := range tr.spans() {
			sp.Timestamp += int64(i) * 1000
			spans = append(spans, sp)
		}
	}
	for start := 0; start < len(spans); start += 100 {
		if err := w.Accept(ctxBG, spans[start:start+100]); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		db   func() *sql.DB
	}{
		{"pool", func() *sql.DB { return poolDB(b, dsn) }},
		{"database-sql", func() *sql.DB {
			db := openPlain(b, dsn)
			db.SetMaxOpenConns(4)
			db.SetMaxIdleConns(4)
			return db
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := mysqlstore.Open(ctxBG, c.db(), mysqlstore.Options{Logger: quietLogger})
			if err != nil {
				b.Fatal(err)
			}
			q := request(svc("backend"), limit(10))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				got, err := s.GetTraces(ctxBG, q)
				if err != nil || len(got) != 10 {
					b.Fatalf("GetTraces = %d traces, %v", len(got), err)
				}
			}
		})
	}
}
