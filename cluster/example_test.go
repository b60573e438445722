package cluster_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/sqlpool/sqlpool/cluster"
	"github.com/sqlpool/sqlpool/internal/fakedb"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// A pool over a 3-node MariaDB Galera cluster: connections spread round-robin over the Synced
// nodes, a node that dies or loses quorum is skipped and probed back in, and connections move
// back to it over 30 s. (Not run: it needs the cluster.)
func Example() {
	hosts, err := cluster.MySQLHosts(
		"app:secret@tcp(db1:3306)/app",
		"app:secret@tcp(db2:3306)/app",
		"app:secret@tcp(db3:3306)/app",
	)
	if err != nil {
		log.Fatal(err)
	}
	c, err := cluster.New(cluster.Config{
		Hosts:           hosts,
		Strategy:        cluster.RoundRobin,
		Ready:           cluster.GaleraReady,
		RebalancePeriod: 30 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	p, err := pool.New(c, pool.Config{Name: "app", MaxConns: 12})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close() // also stops the connector's monitor
	db := p.OpenDB()
	defer db.Close()

	// Writes through retry.Tx survive a node's death: a transaction that lost its connection
	// before COMMIT runs again on another node.
	err = retry.Tx(context.Background(), db, nil, retry.Policy{}, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES (?)", 42)
		return err
	})
	if err != nil {
		log.Print(err)
	}
}

// Sequential puts every connection on the first healthy host; the others are fallbacks.
func ExampleConnector_Hosts() {
	primary, fallback := fakedb.New(), fakedb.New()
	c, err := cluster.New(cluster.Config{
		Strategy: cluster.Sequential,
		Hosts: []cluster.Host{
			{Name: "primary:3306", Connector: primary},
			{Name: "fallback:3306", Connector: fallback},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	p, err := pool.New(c, pool.Config{MaxConns: 4})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	for p.Stats().Total < 4 {
		time.Sleep(time.Millisecond)
	}
	for _, h := range c.Hosts() {
		fmt.Printf("%s up=%v connections=%d\n", h.Name, h.Up, h.Conns.Total)
	}
	// Output:
	// primary:3306 up=true connections=4
	// fallback:3306 up=true connections=0
}
