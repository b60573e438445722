// Command gorm runs GORM on sqlpool: gorm.io/driver/mysql is given the pool's *sql.DB as its
// connection (mysql.Config{Conn: db}) and everything else is plain GORM — models, CRUD,
// transactions, prepared statements — plus transactions that retry.TxWith runs again on a
// deadlock, through a four-line adapter (gormTx). It starts an in-process MySQL-protocol server (the
// embedded go-mysql-server used by the tests); pass -dsn to use a real MySQL or MariaDB
// server instead.
//
//	go run ./app/examples/gorm
//	go run ./app/examples/gorm -dsn 'user:pass@tcp(127.0.0.1:3306)/test'
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"
	gmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/sqlpool/sqlpool/app/embedded"
	_ "github.com/sqlpool/sqlpool/mysqldialect" // MySQL's pool.Dialect, registered on import
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/retry"
)

// gormTx is a GORM transaction as retry.TxWith takes it: GORM's Commit and Rollback return the
// *gorm.DB, these return its error (the driver's, through database/sql, so that TxWith can tell
// a COMMIT that may have been applied from one that was not).
type gormTx struct{ *gorm.DB }

func (t gormTx) Commit() error   { return t.DB.Commit().Error }
func (t gormTx) Rollback() error { return t.DB.Rollback().Error }

// beginGorm returns the begin function retry.TxWith calls for each attempt.
func beginGorm(db *gorm.DB) func(context.Context, *sql.TxOptions) (gormTx, error) {
	return func(ctx context.Context, opts *sql.TxOptions) (gormTx, error) {
		tx := db.WithContext(ctx).Begin(opts)
		return gormTx{tx}, tx.Error
	}
}

// reprice moves delta from one product's price to another's in one transaction, which
// retry.TxWith commits, or rolls back and runs again on a deadlock (1213), a lock wait timeout
// (1205) or a connection lost before COMMIT. A COMMIT whose outcome is unknown is not run
// again: the error matches retry.ErrAmbiguousCommit.
func reprice(ctx context.Context, db *gorm.DB, p retry.Policy, from, to string, delta int) error {
	return retry.TxWith(ctx, beginGorm(db), nil, p, func(ctx context.Context, tx gormTx) error {
		if err := tx.Model(&Product{}).Where("code = ?", from).Update("price", gorm.Expr("price - ?", delta)).Error; err != nil {
			return err
		}
		return tx.Model(&Product{}).Where("code = ?", to).Update("price", gorm.Expr("price + ?", delta)).Error
	})
}

// Product is a GORM model stored in example_gorm_products.
type Product struct {
	ID    int64  `gorm:"primaryKey"`
	Code  string `gorm:"size:32;not null"`
	Price int    `gorm:"not null"`
}

// TableName names the model's table.
func (Product) TableName() string { return "example_gorm_products" }

func main() {
	dsn := flag.String("dsn", "", "go-sql-driver/mysql DSN; empty starts the embedded server")
	flag.Parse()
	if err := run(*dsn); err != nil {
		fmt.Fprintln(os.Stderr, "gorm example:", err)
		os.Exit(1)
	}
}

func run(dsn string) error {
	if dsn == "" {
		d, stop, err := embedded.Start()
		if err != nil {
			return fmt.Errorf("starting the embedded server: %w", err)
		}
		defer stop()
		dsn = d
	}
	mcfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("parsing the DSN: %w", err)
	}
	connector, err := mysql.NewConnector(mcfg)
	if err != nil {
		return err
	}
	p, err := pool.New(connector, pool.Config{Name: "gorm-example", MaxConns: 4, AcquireTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer p.Close()
	sdb := p.OpenDB()
	defer sdb.Close()

	// Give GORM the pool's *sql.DB. Size the pool in pool.Config, not with GORM's or
	// database/sql's SetMaxOpenConns: p.OpenDB() keeps no idle connections of its own.
	db, err := gorm.Open(gmysql.New(gmysql.Config{Conn: sdb}), &gorm.Config{
		PrepareStmt: true, // prepared once per physical connection, in the pool's statement cache
		Logger:      logger.Default.LogMode(logger.Warn),
	})
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g := db.WithContext(ctx)
	if err := g.Exec("DROP TABLE IF EXISTS example_gorm_products").Error; err != nil {
		return err
	}
	if err := g.Exec("CREATE TABLE example_gorm_products (id BIGINT PRIMARY KEY AUTO_INCREMENT, code VARCHAR(32) NOT NULL, price INT NOT NULL)").Error; err != nil {
		return err
	}
	defer db.Exec("DROP TABLE IF EXISTS example_gorm_products")

	if err := g.Create(&[]Product{{Code: "D42", Price: 100}, {Code: "E17", Price: 250}}).Error; err != nil {
		return fmt.Errorf("create: %w", err)
	}
	// A transaction: GORM commits when the function returns nil and rolls back when it returns
	// an error or panics.
	err = g.Transaction(func(tx *gorm.DB) error {
		if err := tx.Model(&Product{}).Where("code = ?", "D42").Update("price", 120).Error; err != nil {
			return err
		}
		return tx.Create(&Product{Code: "F99", Price: 5}).Error
	})
	if err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	// A transaction that runs again when it is worth another try. The zero Policy is the
	// defaults (3 attempts, 10 ms..1 s full-jitter backoff, the process-wide budget); Dialect
	// reads errors as the pool does.
	policy := retry.Policy{Dialect: p.Dialect()}
	if err := reprice(ctx, db, policy, "E17", "F99", 10); err != nil {
		return fmt.Errorf("reprice: %w", err)
	}
	var products []Product
	if err := g.Order("code").Find(&products).Error; err != nil {
		return err
	}
	for _, pr := range products {
		fmt.Printf("product %d: %s at %d\n", pr.ID, pr.Code, pr.Price)
	}
	if err := g.Delete(&Product{}, products[2].ID).Error; err != nil {
		return err
	}
	fmt.Println("pool:", p.Stats())
	return nil
}
