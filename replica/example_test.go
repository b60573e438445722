package replica_test

import (
	"context"
	"database/sql"
	"log"
	"net/http"
	"time"

	"github.com/sqlpool/sqlpool/cluster"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/replica"
)

// A MariaDB primary and two GTID replicas: writes on the writer, reads on the reader, and a
// user's reads see that user's writes. Each replica's pool is over a one-host cluster.Connector,
// whose heartbeat and probes take it out of rotation and back. (Not run: it needs the servers.)
func Example() {
	primaryHosts, _ := cluster.MySQLHosts("app:secret@tcp(db1:3306)/app")
	primary, err := pool.New(primaryHosts[0].Connector, pool.Config{Name: "primary", MaxConns: 20})
	if err != nil {
		log.Fatal(err)
	}
	defer primary.Close()
	var replicas []replica.Replica
	for _, dsn := range []string{"app:secret@tcp(db2:3306)/app", "app:secret@tcp(db3:3306)/app"} {
		hosts, _ := cluster.MySQLHosts(dsn)
		c, err := cluster.New(cluster.Config{Hosts: hosts})
		if err != nil {
			log.Fatal(err)
		}
		p, err := pool.New(c, pool.Config{Name: hosts[0].Name, MaxConns: 20})
		if err != nil {
			log.Fatal(err)
		}
		defer p.Close()
		replicas = append(replicas, replica.Replica{Name: hosts[0].Name, Connector: p,
			Up: func() bool { return c.Hosts()[0].Up }})
	}
	r, err := replica.New(replica.Config{
		Primary:       primary,
		Replicas:      replicas,
		Flavor:        replica.MariaDB,
		Mode:          replica.PerToken,
		WaitTimeout:   time.Second,
		MaxReplicaLag: 10 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()

	// Per user: the Router keeps a Token per key.
	ctx := replica.WithKey(context.Background(), "user-42")
	if _, err := r.Writer().ExecContext(ctx, "UPDATE profile SET name = ? WHERE id = 42", "Ada"); err != nil {
		log.Fatal(err)
	}
	var name string
	// Sees "Ada": the replica has applied the UPDATE, or the read waits for it, or goes to the
	// primary after WaitTimeout.
	_ = r.Reader().QueryRowContext(ctx, "SELECT name FROM profile WHERE id = 42").Scan(&name)
}

// Across instances of an application: the Token travels in a cookie.
func ExampleRouter_ParseToken() {
	var r *replica.Router // as in Example
	handler := func(w http.ResponseWriter, req *http.Request) {
		text := ""
		if c, err := req.Cookie("rtoken"); err == nil {
			text = c.Value
		}
		tok, err := r.ParseToken(text)
		if err != nil {
			tok = r.NewToken()
		}
		ctx := replica.WithToken(req.Context(), tok)
		var n int
		_ = r.Reader().QueryRowContext(ctx, "SELECT COUNT(*) FROM orders").Scan(&n)
		http.SetCookie(w, &http.Cookie{Name: "rtoken", Value: tok.String(), HttpOnly: true})
	}
	_ = handler
	_ = sql.ErrNoRows
}
