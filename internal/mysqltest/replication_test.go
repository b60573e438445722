package mysqltest

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

func TestReplicationApplies(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts three private mariadbd")
	}
	r := StartReplication(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, err := sql.Open("mysql", r.Primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"CREATE TABLE rt (id INT PRIMARY KEY, v INT)", "INSERT INTO rt VALUES (1, 1)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.PauseApply(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "UPDATE rt SET v = 2"); err != nil {
		t.Fatal(err)
	}
	read := func(i int) int {
		rdb, err := sql.Open("mysql", r.Replicas[i].DSN())
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		var v int
		if err := rdb.QueryRowContext(ctx, "SELECT v FROM rt WHERE id = 1").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	// Replica 2 catches up; replica 1 stays at the old value while paused.
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	var pos string
	if err := db.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	rdb, _ := sql.Open("mysql", r.Replicas[1].DSN())
	defer rdb.Close()
	var res int
	if err := rdb.QueryRowContext(wctx, "SELECT MASTER_GTID_WAIT(?, 30)", pos).Scan(&res); err != nil || res != 0 {
		t.Fatalf("replica 2 wait: %d %v", res, err)
	}
	if v := read(1); v != 2 {
		t.Fatalf("replica 2 reads %d, want 2", v)
	}
	if v := read(0); v != 1 {
		t.Fatalf("paused replica 1 reads %d, want 1", v)
	}
	if err := r.ResumeApply(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitCaughtUp(wctx); err != nil {
		t.Fatal(err)
	}
	if v := read(0); v != 2 {
		t.Fatalf("resumed replica 1 reads %d, want 2", v)
	}
	r.Kill(1)
	if _, err := db.ExecContext(ctx, "UPDATE rt SET v = 3"); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(1); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitCaughtUp(wctx); err != nil {
		t.Fatal(err)
	}
	if v := read(1); v != 3 {
		t.Fatalf("restarted replica 2 reads %d, want 3", v)
	}
}
