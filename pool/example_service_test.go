package pool_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/metrics"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's rules, registered on import
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// A service: one pool with Prometheus metrics, its *sql.DB handed to the handlers, and
// transactions retried after transient errors (deadlocks, lost connections) with retry.Tx,
// counted in the pool's metrics. The example runs on the embedded MySQL-protocol server; a service gives
// pool.New go-sql-driver/mysql's connector for its DSN instead.
func Example_service() {
	connector, stop := embedded()
	defer stop()
	ctx := context.Background()

	m, err := metrics.New(metrics.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := pool.New(connector, pool.Config{Name: "orders", MaxConns: 8, Trace: m.Trace(), Logger: quietLog})
	if err != nil {
		fmt.Println("no database:", err)
		return
	}
	defer p.Close()
	db := p.OpenDB()
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, item VARCHAR(64) NOT NULL)"); err != nil {
		fmt.Println(err)
		return
	}

	// 3 attempts, jittered backoff; retry.Tx counts them in the pool's metrics (its Trace).
	policy := retry.Policy{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		attempt := 0
		var id int64
		err := retry.Tx(r.Context(), db, nil, policy, func(ctx context.Context, tx *sql.Tx) error {
			attempt++
			res, err := tx.ExecContext(ctx, "INSERT INTO orders (item) VALUES (?)", r.FormValue("item"))
			if err != nil {
				return err
			}
			if attempt == 1 { // what InnoDB answers a deadlock victim: the transaction runs again
				return &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}
			}
			id, err = res.LastInsertId()
			return err
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Location", fmt.Sprintf("/orders/%d", id))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "stored after %d attempts", attempt)
	})
	mux.Handle("GET /metrics", m.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := srv.Client().Post(srv.URL+"/orders?item=book", "text/plain", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	body := new(strings.Builder)
	_, _ = bufio.NewReader(resp.Body).WriteTo(body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, body)

	resp, err = srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "sqlpool_retr") && !strings.HasSuffix(line, " 0") {
			fmt.Println(line)
		}
	}
	// Output:
	// 201 stored after 2 attempts
	// sqlpool_retries_total{op="tx",pool="orders"} 1
	// sqlpool_retry_attempts_total{op="tx",pool="orders"} 2
	// sqlpool_retry_calls_total{op="tx",pool="orders",result="ok"} 1
}
