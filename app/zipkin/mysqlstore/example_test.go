package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	_ "github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// Create Zipkin's schema, open a store and write a span twice: it is stored once.
func Example() {
	dsn, stop, err := mysqltest.StartEmbedded() // any MySQL or MariaDB DSN works the same way
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	db, err := sql.Open("mysql", dsn) // or p.OpenDB() on a sqlpool pool
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	if err := mysqlstore.CreateSchema(ctx, db); err != nil { // idempotent
		log.Fatal(err)
	}
	s, err := mysqlstore.Open(ctx, db, mysqlstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	span := model.Span{
		TraceID: model.TraceID{Low: 0x463ac35c9f6413ad}, ID: 0x72485a3953bb6124, Kind: model.KindServer,
		Name: "get /api", Timestamp: 1_700_000_000_000_000, Duration: 1500,
		LocalEndpoint: &model.Endpoint{ServiceName: "frontend"},
		Tags:          map[string]string{"http.method": "GET"},
	}
	for i := 0; i < 2; i++ {
		if err := s.Accept(ctx, []model.Span{span}); err != nil {
			log.Fatal(err)
		}
	}
	var spans, annotations int
	db.QueryRow("SELECT COUNT(*) FROM zipkin_spans").Scan(&spans)
	db.QueryRow("SELECT COUNT(*) FROM zipkin_annotations").Scan(&annotations)
	fmt.Println("span rows:", spans, "annotation rows:", annotations) // sr, ss and the tag
	fmt.Printf("%+v\n", s.Features())
	// Output:
	// span rows: 1 annotation rows: 3
	// {TraceIDHigh:true RemoteServiceName:true IPv6:true Dependencies:true ErrorCount:true}
}
