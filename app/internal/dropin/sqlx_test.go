package dropin_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/sqlpool/sqlpool/pool"
)

type sqlxItem struct {
	ID   int64  `db:"id"`
	Name string `db:"name"`
	Qty  int    `db:"qty"`
}

// withTxx is the transaction helper sqlx users write: it commits when fn returns nil, rolls
// back when it returns an error, and rolls back and re-panics when fn panics.
func withTxx(ctx context.Context, db *sqlx.DB, fn func(*sqlx.Tx) error) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			_ = tx.Rollback()
			panic(r)
		}
	}()
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// sqlx over p.OpenDB(): CRUD with struct scanning and named statements, a transaction, a
// transaction function that panics, and a context cancelled mid-query — on the embedded
// server and on MariaDB.
func TestSQLx(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		p := newPool(t, srv.dsn, pool.Config{MaxConns: 1})
		sdb := p.OpenDB()
		defer sdb.Close()
		db := sqlx.NewDb(sdb, "mysql")
		ctx := context.Background()
		const table = "dropin_sqlx_items"
		mustExec(t, sdb, "DROP TABLE IF EXISTS "+table)
		mustExec(t, sdb, "CREATE TABLE "+table+" (id BIGINT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(64) NOT NULL, qty INT NOT NULL)")
		defer mustExec(t, sdb, "DROP TABLE IF EXISTS "+table)

		t.Run("crud", func(t *testing.T) {
			for _, it := range []sqlxItem{{Name: "apple", Qty: 3}, {Name: "pear", Qty: 5}, {Name: "plum", Qty: 7}} {
				if _, err := db.NamedExecContext(ctx, "INSERT INTO "+table+" (name, qty) VALUES (:name, :qty)", it); err != nil {
					t.Fatalf("NamedExec insert: %v", err)
				}
			}
			var got sqlxItem
			if err := db.GetContext(ctx, &got, "SELECT id, name, qty FROM "+table+" WHERE name = ?", "pear"); err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got.Name != "pear" || got.Qty != 5 || got.ID == 0 {
				t.Fatalf("Get = %+v", got)
			}
			if _, err := db.ExecContext(ctx, "UPDATE "+table+" SET qty = qty + ? WHERE id = ?", 10, got.ID); err != nil {
				t.Fatalf("update: %v", err)
			}
			q, args, err := sqlx.In("SELECT id, name, qty FROM "+table+" WHERE name IN (?) ORDER BY name", []string{"apple", "pear"})
			if err != nil {
				t.Fatal(err)
			}
			var items []sqlxItem
			if err := db.SelectContext(ctx, &items, db.Rebind(q), args...); err != nil {
				t.Fatalf("Select: %v", err)
			}
			if len(items) != 2 || items[0].Name != "apple" || items[1].Qty != 15 {
				t.Fatalf("Select = %+v", items)
			}
			if _, err := db.ExecContext(ctx, "DELETE FROM "+table+" WHERE name = ?", "plum"); err != nil {
				t.Fatalf("delete: %v", err)
			}
			var n int
			if err := db.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+table); err != nil || n != 2 {
				t.Fatalf("count = %d, %v; want 2", n, err)
			}
		})

		t.Run("transaction", func(t *testing.T) {
			err := withTxx(ctx, db, func(tx *sqlx.Tx) error {
				if _, err := tx.NamedExecContext(ctx, "INSERT INTO "+table+" (name, qty) VALUES (:name, :qty)", sqlxItem{Name: "fig", Qty: 1}); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, "UPDATE "+table+" SET qty = qty - 1 WHERE name = ?", "apple")
				return err
			})
			if err != nil {
				t.Fatalf("transaction: %v", err)
			}
			var qty int
			if err := db.GetContext(ctx, &qty, "SELECT qty FROM "+table+" WHERE name = ?", "apple"); err != nil || qty != 2 {
				t.Fatalf("apple qty = %d, %v; want 2 after the commit", qty, err)
			}
			errBoom := errors.New("boom")
			err = withTxx(ctx, db, func(tx *sqlx.Tx) error {
				if _, err := tx.ExecContext(ctx, "DELETE FROM "+table); err != nil {
					return err
				}
				return errBoom
			})
			if !errors.Is(err, errBoom) {
				t.Fatalf("transaction returned %v, want boom", err)
			}
			assertCount(t, db, table, 3)
		})

		t.Run("panicking transaction function", func(t *testing.T) {
			before := p.Stats()
			panicked := func() (r any) {
				defer func() { r = recover() }()
				_ = withTxx(ctx, db, func(tx *sqlx.Tx) error {
					if _, err := tx.ExecContext(ctx, "INSERT INTO "+table+" (name, qty) VALUES (?, ?)", "ghost", 1); err != nil {
						t.Errorf("insert: %v", err)
					}
					panic("handler bug")
				})
				return nil
			}()
			if panicked != "handler bug" {
				t.Fatalf("recovered %v, want the handler's panic", panicked)
			}
			assertCount(t, db, table, 3) // the insert was rolled back
			assertConnectionClean(t, srv, p, before, sdb)
		})

		t.Run("context cancelled mid-query", func(t *testing.T) {
			cancelMidQuery(t, p, sdb, func(ctx context.Context) error {
				var v int
				return db.GetContext(ctx, &v, "SELECT SLEEP(3)")
			})
			assertCount(t, db, table, 3) // and the pool serves the next borrower
		})
	})
}

func assertCount(t *testing.T, db *sqlx.DB, table string, want int) {
	t.Helper()
	var n int
	if err := db.GetContext(context.Background(), &n, "SELECT COUNT(*) FROM "+table); err != nil || n != want {
		t.Fatalf("%s has %d rows (%v); want %d", table, n, err, want)
	}
}
