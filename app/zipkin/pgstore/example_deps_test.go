package pgstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/pgstore"
)

// The background work a server runs beside a store: the dependency drain
// every 3 s and retention of a week, stopped together; a test drains the
// queue itself to reach a drained state. db is a pool's OpenDB() with the
// schema created; it needs a server, so it is compiled but not run.
func ExampleStore_RunDependencyAggregation() {
	var db *sql.DB // p.OpenDB(), as in Example
	if db == nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	s, err := pgstore.Open(ctx, db, pgstore.Options{DependencyDrainInterval: -1}) // drained by the timer only
	if err != nil {
		log.Fatal(err)
	}
	r, err := s.NewRetention(pgstore.RetentionOptions{MaxAge: 7 * 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = s.RunDependencyAggregation(ctx, 0) }() // every DefaultDependencyDrainInterval
	go func() { _ = r.Run(ctx) }()

	n, err := s.DrainDependencies(ctx) // what a test calls
	if err != nil {
		log.Fatal(err)
	}
	lag, _ := s.DependencyLag(ctx)
	fmt.Println("drained writes:", n, "lag:", lag)
}
