package pool_test

import (
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

func ExamplePool_Dialect() {
	connector, stop := embedded()
	defer stop()
	p, err := pool.New(connector, pool.Config{Name: "example", MaxConns: 1, Logger: quietLog})
	if err != nil {
		fmt.Println("no database:", err)
		return
	}
	defer p.Close()

	// The dialect New chose for go-sql-driver's connector (mysqldialect, registered on import).
	// retry reads errors with it as the pool does; retry.Tx over p.OpenDB() finds it by itself.
	policy := retry.Policy{Dialect: p.Dialect()}
	deadlock := &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}
	fmt.Println(p.Dialect().Name(), policy.Classify(deadlock))
	// Output: mysql transient
}
