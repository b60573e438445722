package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// Keep a week of spans: a pass deletes older spans with their annotations
// in small transactions; Run repeats passes until its context ends.
func ExampleStore_NewRetention() {
	dsn, stop, err := mysqltest.StartEmbedded()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := mysqlstore.CreateSchema(ctx, db); err != nil {
		log.Fatal(err)
	}
	s, err := mysqlstore.Open(ctx, db, mysqlstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	now := time.Now()
	for i, age := range []time.Duration{30 * 24 * time.Hour, time.Hour} {
		span := model.Span{TraceID: model.TraceID{Low: uint64(i + 1)}, ID: 1, Name: "get",
			Timestamp: now.Add(-age).UnixMicro(), LocalEndpoint: &model.Endpoint{ServiceName: "web"}}
		if err := s.Accept(ctx, []model.Span{span}); err != nil {
			log.Fatal(err)
		}
	}
	r, err := s.NewRetention(mysqlstore.RetentionOptions{MaxAge: 7 * 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	deleted, err := r.DeleteBefore(ctx, now.Add(-7*24*time.Hour)) // one pass; go r.Run(ctx) keeps going
	if err != nil {
		log.Fatal(err)
	}
	var left int
	db.QueryRow("SELECT COUNT(*) FROM zipkin_spans").Scan(&left)
	fmt.Println("deleted:", deleted, "left:", left)
	// Output:
	// deleted: 1 left: 1
}

// The schema additions that CreateSchema adds to Zipkin's tables; Open
// detects them and the name lookups and getTraces by service use them.
func ExampleStore_Additions() {
	dsn, stop, err := mysqltest.StartEmbedded()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := mysqlstore.CreateSchema(ctx, db); err != nil {
		log.Fatal(err)
	}
	s, err := mysqlstore.Open(ctx, db, mysqlstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", s.Additions())
	fmt.Println(len(mysqlstore.AdditionsDDL()), "tables")
	// Output:
	// {Names:true ServiceSpans:true Tags:true TagIndexes:true}
	// 3 tables
}
