package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// TestStartMariaDB checks the load test's server: pinned with taskset, with
// the buffer pool and connection limit it asks for, database operations
// working, and nothing left behind by stop.
func TestStartMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a private mariadbd")
	}
	if why := mysqltest.MariaDBMissing(); why != "" {
		if mysqltest.MariaDBRequired() {
			t.Fatalf("%s=1: %s", mysqltest.EnvRequireMariaDB, why)
		}
		t.Skip(why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := startMariaDB(ctx, "0", "64M", "", t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	dir := m.srv.Dir()
	defer func() {
		if _, err := os.Stat(dir); err == nil {
			m.stop()
		}
	}()
	var maxConns, bufferPool int64
	if err := m.db.QueryRowContext(ctx, "SELECT @@max_connections, @@innodb_buffer_pool_size").Scan(&maxConns, &bufferPool); err != nil {
		t.Fatal(err)
	}
	if maxConns != 500 || bufferPool != 64<<20 {
		t.Errorf("max_connections %d, innodb_buffer_pool_size %d; want 500 and 64M", maxConns, bufferPool)
	}
	if err := m.resetDatabase(ctx, "load_check"); err != nil {
		t.Fatal(err)
	}
	if n, err := m.countSpans(ctx, "load_check"); err != nil || n != 0 {
		t.Fatalf("countSpans on a database without tables = %d, %v; want 0, nil", n, err)
	}
	if m.pid() == 0 || m.version() == "" {
		t.Errorf("pid %d, version %q", m.pid(), m.version())
	}
	m.stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory after stop: %v, want it removed", err)
	}
}
