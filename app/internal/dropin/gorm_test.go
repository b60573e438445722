package dropin_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	gmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

type gormItem struct {
	ID   int64  `gorm:"primaryKey"`
	Name string `gorm:"size:64;not null"`
	Qty  int    `gorm:"not null"`
}

func (gormItem) TableName() string { return "dropin_gorm_items" }

// openGORM opens GORM on an existing *sql.DB, as a user of the pool does with p.OpenDB().
func openGORM(t testing.TB, db *sql.DB, prepare bool) *gorm.DB {
	t.Helper()
	g, err := gorm.Open(gmysql.New(gmysql.Config{Conn: db}), &gorm.Config{
		PrepareStmt: prepare,
		Logger:      logger.Default.LogMode(logger.Silent),
	})
	if err != nil {
		t.Fatalf("gorm.Open: %v", err)
	}
	return g
}

func prepareModes(t *testing.T, f func(t *testing.T, prepare bool)) {
	for _, prepare := range []bool{false, true} {
		t.Run(fmt.Sprintf("PrepareStmt=%v", prepare), func(t *testing.T) { f(t, prepare) })
	}
}

// resetGORMTable creates the table afresh and returns the function that drops it.
func resetGORMTable(t *testing.T, db *sql.DB) (drop func()) {
	t.Helper()
	mustExec(t, db, "DROP TABLE IF EXISTS dropin_gorm_items")
	mustExec(t, db, "CREATE TABLE dropin_gorm_items (id BIGINT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(64) NOT NULL, qty INT NOT NULL)")
	return func() { mustExec(t, db, "DROP TABLE IF EXISTS dropin_gorm_items") }
}

func gormCount(t *testing.T, g *gorm.DB) int64 {
	t.Helper()
	var n int64
	if err := g.Model(&gormItem{}).Count(&n).Error; err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

// GORM given p.OpenDB(): CRUD, a transaction, a transaction function that panics, and a
// context cancelled mid-query, with PrepareStmt off and on — on the embedded server and on
// MariaDB.
func TestGORM(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		prepareModes(t, func(t *testing.T, prepare bool) {
			p := newPool(t, srv.dsn, pool.Config{MaxConns: 1})
			sdb := p.OpenDB()
			defer sdb.Close()
			defer resetGORMTable(t, sdb)()
			g := openGORM(t, sdb, prepare)
			ctx := context.Background()

			t.Run("crud", func(t *testing.T) {
				items := []gormItem{{Name: "apple", Qty: 3}, {Name: "pear", Qty: 5}, {Name: "plum", Qty: 7}}
				if err := g.WithContext(ctx).Create(&items).Error; err != nil {
					t.Fatalf("Create: %v", err)
				}
				if items[1].ID == 0 {
					t.Fatalf("Create did not fill in the IDs: %+v", items)
				}
				var pear gormItem
				if err := g.WithContext(ctx).Where("name = ?", "pear").First(&pear).Error; err != nil || pear.ID != items[1].ID || pear.Qty != 5 {
					t.Fatalf("First = %+v, %v", pear, err)
				}
				if err := g.WithContext(ctx).Model(&pear).Update("qty", 15).Error; err != nil {
					t.Fatalf("Update: %v", err)
				}
				var found []gormItem
				if err := g.WithContext(ctx).Where("name IN ?", []string{"apple", "pear"}).Order("name").Find(&found).Error; err != nil {
					t.Fatalf("Find: %v", err)
				}
				if len(found) != 2 || found[0].Name != "apple" || found[1].Qty != 15 {
					t.Fatalf("Find = %+v", found)
				}
				if err := g.WithContext(ctx).Delete(&gormItem{}, items[2].ID).Error; err != nil {
					t.Fatalf("Delete: %v", err)
				}
				if err := g.WithContext(ctx).First(&gormItem{}, items[2].ID).Error; !errors.Is(err, gorm.ErrRecordNotFound) {
					t.Fatalf("First after Delete: %v; want ErrRecordNotFound", err)
				}
				if n := gormCount(t, g); n != 2 {
					t.Fatalf("count = %d, want 2", n)
				}
			})

			t.Run("transaction", func(t *testing.T) {
				err := g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
					if err := tx.Create(&gormItem{Name: "fig", Qty: 1}).Error; err != nil {
						return err
					}
					return tx.Model(&gormItem{}).Where("name = ?", "apple").Update("qty", gorm.Expr("qty - ?", 1)).Error
				})
				if err != nil {
					t.Fatalf("Transaction: %v", err)
				}
				var apple gormItem
				if err := g.WithContext(ctx).Where("name = ?", "apple").First(&apple).Error; err != nil || apple.Qty != 2 {
					t.Fatalf("apple = %+v, %v; want qty 2 after the commit", apple, err)
				}
				errBoom := errors.New("boom")
				err = g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
					if err := tx.Where("1 = 1").Delete(&gormItem{}).Error; err != nil {
						return err
					}
					return errBoom
				})
				if !errors.Is(err, errBoom) {
					t.Fatalf("Transaction returned %v, want boom", err)
				}
				if n := gormCount(t, g); n != 3 {
					t.Fatalf("count = %d after a rolled-back delete, want 3", n)
				}
			})

			t.Run("panicking transaction function", func(t *testing.T) {
				before := p.Stats()
				panicked := func() (r any) {
					defer func() { r = recover() }()
					_ = g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
						if err := tx.Create(&gormItem{Name: "ghost", Qty: 1}).Error; err != nil {
							t.Errorf("Create: %v", err)
						}
						panic("handler bug")
					})
					return nil
				}()
				if panicked != "handler bug" {
					t.Fatalf("recovered %v, want the handler's panic", panicked)
				}
				if n := gormCount(t, g); n != 3 {
					t.Fatalf("count = %d, want 3: GORM rolls back when the function panics", n)
				}
				assertConnectionClean(t, srv, p, before, sdb)
			})

			t.Run("context cancelled mid-query", func(t *testing.T) {
				cancelMidQuery(t, p, sdb, func(ctx context.Context) error {
					var v int
					return g.WithContext(ctx).Raw("SELECT SLEEP(3)").Scan(&v).Error
				})
				if n := gormCount(t, g); n != 3 {
					t.Fatalf("count = %d after the cancelled query, want 3", n)
				}
			})
		})
	})
}

// Through the byte-counting proxy, a GORM workload sends no more through the pool than through
// plain database/sql, and the pool runs no probe (PING), release plan (ROLLBACK, SET) or
// reconnect of its own, with PrepareStmt off and on. With PrepareStmt off the bytes and
// packets are exactly the same. With it on the pool sends fewer: GORM prepares and closes a
// statement for each call inside a transaction (COM_STMT_PREPARE, COM_STMT_CLOSE), which the
// pool's statement cache answers without a round trip. (The DSN interpolates parameters, so
// that both sides send the same statements: without it plain database/sql prepares and closes
// a statement per call with arguments, which the cache also saves.)
func TestGORMSendsOnlyItsOwnCommands(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		prepareModes(t, func(t *testing.T, prepare bool) {
			cfg, err := mysql.ParseDSN(srv.dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.InterpolateParams = true
			proxy := mysqltest.NewProxy(t, cfg.Addr)
			dsn := proxy.DSN(cfg.FormatDSN())

			p := newPool(t, dsn, pool.Config{MaxConns: 2})
			pooledDB := p.OpenDB()
			defer pooledDB.Close()
			plainDB := sql.OpenDB(mysqlConnector(t, dsn))
			defer plainDB.Close()
			plainDB.SetMaxIdleConns(2)
			defer resetGORMTable(t, plainDB)()
			for id := 1; id <= 9; id++ {
				mustExec(t, plainDB, "INSERT INTO dropin_gorm_items (id, name, qty) VALUES (?, ?, ?)", id, fmt.Sprint("item", id), id)
			}

			ctx := context.Background()
			// Every operation's bytes are the same on both sides: the same IDs, values of the
			// same width.
			workload := func(g *gorm.DB, cycles int) {
				for i := 0; i < cycles; i++ {
					id := int64(i%9 + 1)
					var it gormItem
					if err := g.WithContext(ctx).First(&it, id).Error; err != nil {
						t.Fatalf("First(%d): %v", id, err)
					}
					if err := g.WithContext(ctx).Model(&it).Update("qty", i%10).Error; err != nil {
						t.Fatalf("Update: %v", err)
					}
					var some []gormItem
					if err := g.WithContext(ctx).Where("qty < ?", 5).Limit(3).Find(&some).Error; err != nil {
						t.Fatalf("Find: %v", err)
					}
					if err := g.WithContext(ctx).Create(&gormItem{ID: 100, Name: "temp", Qty: 1}).Error; err != nil {
						t.Fatalf("Create: %v", err)
					}
					if err := g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
						if err := tx.Model(&gormItem{}).Where("id = ?", 100).Update("qty", 2).Error; err != nil {
							return err
						}
						return tx.Delete(&gormItem{}, 100).Error
					}); err != nil {
						t.Fatalf("Transaction: %v", err)
					}
				}
			}
			measure := func(g *gorm.DB) mysqltest.Counts {
				workload(g, 3) // warm-up: connections open, statements prepared
				proxy.Reset()
				workload(g, 50)
				return proxy.Counts()
			}

			gPooled := openGORM(t, pooledDB, prepare)
			gPlain := openGORM(t, plainDB, prepare)
			waitFor(t, "the pool is full", func() bool { return p.Stats().Idle == 2 })
			before := p.Stats()
			pooled := measure(gPooled)
			after := p.Stats()
			plain := measure(gPlain)

			// Each cycle's Create(&gormItem{ID: 100}) reports id 100, and the pool cannot
			// tell an explicit id from a generated one (the OK packet carries both alike), so
			// it holds 100 as a possibly stale LAST_INSERT_ID(). The next cycle's Create, whose
			// value 100 could equal it, gets the reset just before it: one SET
			// last_insert_id=0 (25 bytes, one packet) per cycle. (On MariaDB GORM inserts with
			// INSERT … RETURNING through Query, which reports no id; the stale id the previous
			// Create may have left is reset before it all the same: one per cycle too.)
			const resetBytes, cycles = 4 + 1 + len("SET last_insert_id=0"), 50
			pooled.ClientBytes -= int64(resetBytes * cycles)
			pooled.ClientPackets -= cycles
			same := pooled.ClientBytes == plain.ClientBytes && pooled.ClientPackets == plain.ClientPackets
			fewer := pooled.ClientBytes <= plain.ClientBytes && pooled.ClientPackets <= plain.ClientPackets
			if !prepare && !same || prepare && !fewer {
				t.Errorf("GORM through the pool sent %d bytes in %d packets; through plain database/sql %d bytes in %d packets",
					pooled.ClientBytes, pooled.ClientPackets, plain.ClientBytes, plain.ClientPackets)
			}
			if pooled.Conns != plain.Conns {
				t.Errorf("connections opened while measuring: pool %d, plain %d", pooled.Conns, plain.Conns)
			}
			if after.ReleasePlans != before.ReleasePlans || after.Validations != before.Validations ||
				after.Created != before.Created || after.Closed != before.Closed {
				t.Errorf("the pool ran release plans, probes or reconnects during GORM's work: before %+v, after %+v", before, after)
			}
			t.Logf("50 cycles sent %d bytes in %d packets through the pool, %d bytes in %d packets through plain database/sql",
				pooled.ClientBytes, pooled.ClientPackets, plain.ClientBytes, plain.ClientPackets)
		})
	})
}
