package pool_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/testutil"
	"github.com/sqlpool/sqlpool/pool"
)

type tenantKey struct{}
type roleKey struct{}

// A per-request setting made by BeforeAcquire (SET @tenant, and on MariaDB SET ROLE) is seen by
// that request and never by another: 16 goroutines through p.OpenDB() over 3 connections, a
// third of the requests without a tenant (they must read NULL).
func TestTenantHookNeverReachesAnotherRequest(t *testing.T) {
	dsn := mysqltest.DSN(t)
	const role = "sqlpool_hook_role"
	withRole := mysqltest.IsMariaDB()
	if withRole {
		admin := openAdmin(t, dsn)
		mustExec(t, admin, "CREATE ROLE IF NOT EXISTS "+role)
		mustExec(t, admin, "GRANT SELECT ON test.* TO "+role)
		mustExec(t, admin, "GRANT "+role+" TO CURRENT_USER")
		t.Cleanup(func() { _, _ = admin.Exec("DROP ROLE IF EXISTS " + role) })
	}
	p := newMySQLPool(t, dsn, pool.Config{MaxConns: 3, AcquireTimeout: 10 * time.Second, Hooks: pool.Hooks{
		BeforeAcquire: func(ctx context.Context, c pool.HookConn) (bool, error) {
			if tenant, ok := ctx.Value(tenantKey{}).(string); ok {
				if err := c.Exec(ctx, "SET @tenant = ?", tenant); err != nil {
					return false, err
				}
			}
			if ctx.Value(roleKey{}) != nil {
				if err := c.Exec(ctx, "SET ROLE "+role); err != nil {
					return false, err
				}
			}
			return true, nil
		},
	}})
	db := p.OpenDB()
	defer db.Close()
	var wg sync.WaitGroup
	var requests, plans atomic.Int64
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				ctx := context.Background()
				want := ""
				if (g+i)%3 != 0 {
					want = fmt.Sprintf("tenant-%d-%d", g, i)
					ctx = context.WithValue(ctx, tenantKey{}, want)
				}
				wantRole := withRole && (g+i)%4 == 1
				if wantRole {
					ctx = context.WithValue(ctx, roleKey{}, true)
				}
				c, err := db.Conn(ctx)
				if err != nil {
					errs <- err
					return
				}
				var tenant, curRole sql.NullString
				q := "SELECT @tenant, NULL"
				if withRole {
					q = "SELECT @tenant, CURRENT_ROLE()"
				}
				err = c.QueryRowContext(ctx, q).Scan(&tenant, &curRole)
				_ = c.Close()
				if err != nil {
					errs <- err
					return
				}
				if tenant.String != want || tenant.Valid != (want != "") {
					errs <- fmt.Errorf("request %d/%d read @tenant %v, want %q", g, i, tenant, want)
					return
				}
				if curRole.Valid != wantRole {
					errs <- fmt.Errorf("request %d/%d read CURRENT_ROLE() %v, want role %v", g, i, curRole, wantRole)
					return
				}
				requests.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	plans.Store(int64(p.Stats().ReleasePlans))
	t.Logf("%d requests, %d release plans, %d connections opened (SET ROLE discards: %v)", requests.Load(), plans.Load(), p.Stats().Created, withRole)
}

// openAdmin opens a plain database/sql handle on dsn, for setup.
func openAdmin(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db := sql.OpenDB(mysqltest.QuietConnector(t, dsn))
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Rotating a MariaDB user's password under 16 goroutines of load through WithCredentials: 0
// caller errors; the connections opened before keep working; while the source fails for a
// moment (the pool's connections just evicted) the creator backs off and borrowers wait, within
// AcquireTimeout; every connection the server
// accepted after the rotation was dialled with the new password (each connection tells, from a
// session variable its connector set, which credentials built it; the processlist shows the
// pool's connections at the end are all new ones).
func TestPasswordRotationUnderLoad(t *testing.T) {
	mysqltest.RequireMariaDB(t, "ALTER USER and the processlist of a real server")
	dsn := mysqltest.DSN(t)
	admin := openAdmin(t, dsn)
	const user = "sqlpool_rot"
	mustExec(t, admin, "DROP USER IF EXISTS "+user)
	mustExec(t, admin, "CREATE USER "+user+" IDENTIFIED BY 'pw-1'")
	mustExec(t, admin, "GRANT SELECT ON test.* TO "+user)
	t.Cleanup(func() { _, _ = admin.Exec("DROP USER IF EXISTS " + user) })

	base, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	base.User = user
	base.Logger = mysqltest.QuietLogger{}
	var version atomic.Int32
	version.Store(1)
	var sourceDown atomic.Bool
	var sourceCalls, sourceFailures atomic.Int32
	src := func(ctx context.Context, host string) (driver.Connector, error) {
		sourceCalls.Add(1)
		if sourceDown.Load() {
			sourceFailures.Add(1)
			return nil, errors.New("secret store unavailable")
		}
		v := version.Load()
		c := base.Clone()
		c.Passwd = fmt.Sprintf("pw-%d", v)
		c.Params = map[string]string{"@sqlpool_cred": fmt.Sprint(v)} // SET at connect, before the baseline
		return mysql.NewConnector(c)
	}
	type opened struct {
		id      int64
		version int64
	}
	var mu sync.Mutex
	var conns []opened
	p, err := pool.New(pool.WithCredentials(base.Addr, src), pool.Config{
		MaxConns: 8, AcquireTimeout: 10 * time.Second, Logger: quietLog,
		Hooks: pool.Hooks{AfterConnect: func(ctx context.Context, c pool.HookConn) error {
			row, err := c.QueryRow(ctx, "SELECT CONNECTION_ID(), CAST(@sqlpool_cred AS SIGNED)")
			if err != nil {
				return err
			}
			mu.Lock()
			conns = append(conns, opened{toInt(row[0]), toInt(row[1])})
			mu.Unlock()
			return nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	db := p.OpenDB()
	defer db.Close()

	ctx := context.Background()
	old, err := db.Conn(ctx) // held across the rotation
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var queries, callerErrors atomic.Int64
	var firstErr atomic.Pointer[error]
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var one int
				if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
					callerErrors.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				queries.Add(1)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	// The rotation: the source fails for a moment (its secret is being rotated), the server's
	// password changes, then the source hands out the new one. SoftEvict replaces every
	// connection (the ones in use when they are returned), as MaxLifetime would in time.
	sourceDown.Store(true)
	p.SoftEvict()
	time.Sleep(300 * time.Millisecond)
	mustExec(t, admin, "ALTER USER "+user+" IDENTIFIED BY 'pw-2'")
	// A connection opened now gets an id above every connection the server accepted before.
	fresh := openAdmin(t, dsn)
	fresh.SetMaxIdleConns(0)
	var marker int64
	if err := fresh.QueryRow("SELECT CONNECTION_ID()").Scan(&marker); err != nil {
		t.Fatal(err)
	}
	version.Store(2)
	sourceDown.Store(false)
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()

	var one int
	if err := old.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("a connection opened before the rotation stopped working: %v", err)
	}
	_ = old.Close()
	if n := callerErrors.Load(); n != 0 {
		t.Fatalf("%d caller errors (first: %v)", n, *firstErr.Load())
	}
	// The pool refills to MaxConns (the held connection was evicted): once it is full, every
	// connection it has went through AfterConnect.
	testutil.Eventually(t, 5*time.Second, "the pool full again", func() bool { return p.Stats().Total == 8 })
	mu.Lock()
	defer mu.Unlock()
	var after int
	for _, c := range conns {
		if c.id > marker {
			after++
			if c.version != 2 {
				t.Errorf("connection %d, accepted after the rotation, was dialled with credentials %d", c.id, c.version)
			}
		}
	}
	if after == 0 {
		t.Fatal("no connection was opened after the rotation")
	}
	ids := map[int64]int64{}
	for _, c := range conns {
		ids[c.id] = c.version
	}
	rows, err := admin.Query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?", user)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var listed int
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		listed++
		if v, ok := ids[id]; !ok || v != 2 {
			t.Errorf("processlist: connection %d of %s (credentials %d, known %v) is not one dialled with the new password", id, user, v, ok)
		}
	}
	if listed == 0 {
		t.Fatal("the processlist shows no connection of the pool")
	}
	// The old password no longer works at the server.
	stale := base.Clone()
	stale.Passwd = "pw-1"
	if sc, err := mysql.NewConnector(stale); err == nil {
		if c, err := sc.Connect(ctx); err == nil {
			_ = c.Close()
			t.Fatal("the old password still authenticates: the rotation did not happen")
		}
	}
	t.Logf("%d queries, 0 caller errors; %d dials (%d after the rotation), %d source calls (%d failed); processlist: %d connections, all with the new password",
		queries.Load(), len(conns), after, sourceCalls.Load(), sourceFailures.Load(), listed)
	if sourceFailures.Load() == 0 {
		t.Error("the source never failed: the test did not exercise the dial failure path")
	}
}

func toInt(v driver.Value) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case []byte:
		var n int64
		fmt.Sscan(string(x), &n)
		return n
	}
	return -1
}
