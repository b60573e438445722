package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/pgstore"
	_ "github.com/sqlpool/sqlpool/pgdialect" // the pool's PostgreSQL rules
	"github.com/sqlpool/sqlpool/pool"
)

// Create the schema on a PostgreSQL server, open a store on a sqlpool pool
// over pgx, and write a span twice: it is stored once (the second COPY hits
// the duplicate and goes through the staging table). It needs a server, so
// it is compiled but not run by go test.
func Example() {
	cfg, err := pgx.ParseConfig("postgres://zipkin:secret@127.0.0.1:5432/zipkin?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	p, err := pool.New(stdlib.GetConnector(*cfg), pool.Config{MaxConns: 4, Logger: slog.Default()})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	db := p.OpenDB()
	defer db.Close()
	ctx := context.Background()
	if err := pgstore.CreateSchema(ctx, db); err != nil { // idempotent
		log.Fatal(err)
	}
	s, err := pgstore.Open(ctx, db, pgstore.Options{AutocompleteKeys: []string{"http.method"}})
	if err != nil {
		log.Fatal(err)
	}
	span := model.Span{
		TraceID: model.TraceID{Low: 0x463ac35c9f6413ad}, ID: 0x72485a3953bb6124, Kind: model.KindServer,
		Name: "get /api", Timestamp: 1_700_000_000_000_000, Duration: 1500,
		LocalEndpoint: &model.Endpoint{ServiceName: "frontend"},
		Tags:          map[string]string{"http.method": "GET"},
	}
	for range 2 {
		if err := s.Accept(ctx, []model.Span{span}); err != nil {
			log.Fatal(err)
		}
	}
	trace, err := s.GetTrace(ctx, span.TraceID)
	if err != nil {
		log.Fatal(err)
	}
	st := s.Stats()
	fmt.Println("spans:", len(trace), "copies:", st.Copies, "staged:", st.Staged)
	// A run prints: spans: 1 copies: 1 staged: 1
}
