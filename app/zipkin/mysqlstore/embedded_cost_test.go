package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/embedded"
	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// TestEmbeddedWriteCost measures what one Accept of spans with 8 tags
// (about 10 rows each) costs on the in-process embedded server
// (go-mysql-server's memory engine) as the tables fill: the figures behind
// the embedded mode's batch and transaction sizes (docs/server.md). It
// runs only with EMBEDDED_COST set to the number of 20-span batches to
// write (e.g. 60).
func TestEmbeddedWriteCost(t *testing.T) {
	var batches int
	if _, err := fmt.Sscan(os.Getenv("EMBEDDED_COST"), &batches); err != nil || batches < 1 {
		t.Skip("set EMBEDDED_COST=<batches of 20 spans> to measure")
	}
	dsn, stop, err := embedded.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	defer db.Close()
	ctx := context.Background()
	if err := mysqlstore.CreateSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	s, err := mysqlstore.Open(ctx, db, mysqlstore.Options{Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{}
	for k := 0; k < 8; k++ {
		tags[fmt.Sprintf("k%d", k)] = "value"
	}
	for b := 0; b < batches; b++ {
		spans := make([]model.Span, 20)
		for i := range spans {
			spans[i] = model.Span{TraceID: model.TraceID{Low: uint64(b*2 + i/10 + 1)}, ID: model.ID(i + 1), Name: "op", Kind: model.KindServer,
				Timestamp: time.Now().UnixMicro(), Duration: 100, LocalEndpoint: &model.Endpoint{ServiceName: "svc"}, Tags: tags}
		}
		t0 := time.Now()
		if err := s.Accept(ctx, spans); err != nil {
			t.Fatal(err)
		}
		if b%10 == 0 || b == batches-1 {
			t.Logf("batch %d: 20 spans (%d rows) in %v; %d annotation rows stored", b, 20*11, time.Since(t0).Round(time.Millisecond), s.Stats().AnnotationRows)
		}
	}
}
