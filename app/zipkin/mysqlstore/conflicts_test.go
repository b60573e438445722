package mysqlstore_test

import (
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/retry"
)

// A write that waits on a row lock past innodb_lock_wait_timeout (1205) is
// run again and counted; once the lock is gone it stores its spans.
func TestLockWaitTimeoutRetriedAndCounted(t *testing.T) {
	if !mysqltest.IsMariaDB() {
		mysqltest.RequireMariaDB(t, "lock wait timeouts need InnoDB")
		return
	}
	ctx := ctxT(t)
	dsn := freshDatabase(t, mysqltest.DSN(t))
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"innodb_lock_wait_timeout": "1"}
	db := openPlain(t, cfg.FormatDSN())
	if err := mysqlstore.CreateSchema(ctx, db); err != nil {
		t.Fatal(err)
	}
	s, err := mysqlstore.Open(ctx, db, mysqlstore.Options{Logger: quietLogger,
		Retry: retry.Policy{MaxAttempts: 100, BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Budget: retry.NewBudget(retry.BudgetConfig{})}})
	if err != nil {
		t.Fatal(err)
	}
	sp := model.Span{TraceID: model.TraceID{Low: 42}, ID: 7, Name: "op", Timestamp: time.Now().UnixMicro(),
		LocalEndpoint: ep("svc", "", 0)}
	if err := s.Accept(ctx, []model.Span{sp}); err != nil {
		t.Fatal(err)
	}
	blocker := openPlain(t, dsn)
	tx, err := blocker.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := tx.QueryRowContext(ctx, "SELECT id FROM zipkin_spans WHERE trace_id = 42 AND id = 7 FOR UPDATE").Scan(&id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	sp.Name = "renamed"
	go func() { done <- s.Accept(ctx, []model.Span{sp}) }()
	deadline := time.Now().Add(time.Minute)
	for s.Stats().LockWaitTimeouts == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Accept after the lock was released: %v", err)
	}
	if n := s.Stats().LockWaitTimeouts; n == 0 {
		t.Fatal("no lock wait timeout counted within a minute")
	}
	var name string
	if err := db.QueryRowContext(ctx, "SELECT name FROM zipkin_spans WHERE trace_id = 42 AND id = 7").Scan(&name); err != nil || name != "renamed" {
		t.Fatalf("name %q, %v: the retried write did not land", name, err)
	}
}
