package mysqltest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvRequireReplication, when "1", makes StartReplication fail a test instead of skipping it
// when mariadbd is not installed.
const EnvRequireReplication = "SQLPOOL_REQUIRE_REPLICATION"

// Replication is a MariaDB primary and its replicas on 127.0.0.1, replicating by GTID
// (MASTER_USE_GTID=slave_pos), started by StartReplication. Each server is a private MariaDB
// (StartMariaDBServer) with its own data dir and port; the primary has a binary log in ROW
// format and server id 1, replica i (1-based) server id i+1.
type Replication struct {
	Primary  *MariaDB
	Replicas []*MariaDB
}

// StartReplication starts a primary and n replicas for one test and stops them in tb.Cleanup.
// Start-up takes a few seconds (the servers are initialised in parallel). Without mariadbd it
// skips the test, or fails it when SQLPOOL_REQUIRE_REPLICATION=1 or SQLPOOL_REQUIRE_MARIADB=1.
func StartReplication(tb testing.TB, n int) *Replication {
	tb.Helper()
	if why := MariaDBMissing(); why != "" {
		if os.Getenv(EnvRequireReplication) == "1" {
			tb.Fatalf(EnvRequireReplication+"=1: %s", why)
		}
		skipOrFail(tb, "%s", why)
		return nil
	}
	r, err := StartReplicationServers(n)
	if r != nil {
		tb.Cleanup(func() {
			if err := r.Close(); err != nil {
				tb.Errorf("mysqltest: %v", err)
			}
		})
	}
	if err != nil {
		tb.Fatalf("mysqltest: %v", err)
	}
	return r
}

// StartReplicationServers is StartReplication without a test: the caller closes the result
// (also when it is returned with an error, if not nil).
func StartReplicationServers(n int) (*Replication, error) {
	r := &Replication{Replicas: make([]*MariaDB, n)}
	var wg sync.WaitGroup
	errs := make([]error, n+1)
	start := func(i int) {
		defer wg.Done()
		args := []string{"--server-id=" + strconv.Itoa(i+1), "--log-bin=binlog", "--binlog-format=ROW",
			"--gtid-strict-mode=ON", "--relay-log=relay", "--skip-slave-start=0"}
		name := "primary"
		if i > 0 {
			name = "replica" + strconv.Itoa(i)
		}
		m, err := StartMariaDBServer(MariaDBOptions{Name: name, Args: args})
		if i == 0 {
			r.Primary = m
		} else {
			r.Replicas[i-1] = m
		}
		errs[i] = err
	}
	for i := 0; i <= n; i++ {
		wg.Add(1)
		go start(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return r, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var pos string
	if err := r.queryRow(ctx, r.Primary, "SELECT @@gtid_binlog_pos", &pos); err != nil {
		return r, err
	}
	for i, m := range r.Replicas {
		stmts := []string{
			"SET GLOBAL gtid_slave_pos = '" + pos + "'",
			fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
				r.Primary.Port(), MariaDBUser, MariaDBPassword),
			"START SLAVE",
		}
		for _, s := range stmts {
			if err := r.exec(ctx, m, s); err != nil {
				return r, fmt.Errorf("replica %d: %w", i+1, err)
			}
		}
	}
	return r, r.WaitCaughtUp(ctx)
}

// Close stops every server and removes their directories.
func (r *Replication) Close() error {
	var errs []error
	for _, m := range append([]*MariaDB{r.Primary}, r.Replicas...) {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}

// ReplicaDSNs returns the replicas' DSNs (privileged user, database test).
func (r *Replication) ReplicaDSNs() []string {
	out := make([]string, len(r.Replicas))
	for i, m := range r.Replicas {
		out[i] = m.DSN()
	}
	return out
}

func (r *Replication) exec(ctx context.Context, m *MariaDB, q string) error {
	db, err := sql.Open("mysql", m.DSN())
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("%s: %q: %w", m.Addr(), q, err)
	}
	return nil
}

func (r *Replication) queryRow(ctx context.Context, m *MariaDB, q string, dst ...any) error {
	db, err := sql.Open("mysql", m.DSN())
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, q).Scan(dst...); err != nil {
		return fmt.Errorf("%s: %q: %w", m.Addr(), q, err)
	}
	return nil
}

// Exec runs q on replica i (0-based) as the privileged user.
func (r *Replication) Exec(ctx context.Context, i int, q string) error {
	return r.exec(ctx, r.Replicas[i], q)
}

// PauseApply stops replica i's SQL thread (STOP SLAVE SQL_THREAD): it keeps receiving the
// primary's binary log but applies nothing, so it falls behind until ResumeApply.
func (r *Replication) PauseApply(ctx context.Context, i int) error {
	return r.exec(ctx, r.Replicas[i], "STOP SLAVE SQL_THREAD")
}

// ResumeApply starts replica i's SQL thread again (START SLAVE SQL_THREAD).
func (r *Replication) ResumeApply(ctx context.Context, i int) error {
	return r.exec(ctx, r.Replicas[i], "START SLAVE SQL_THREAD")
}

// SetDelay makes replica i apply each event d after the primary committed it (MASTER_DELAY,
// whole seconds); 0 ends the delay.
func (r *Replication) SetDelay(ctx context.Context, i int, d time.Duration) error {
	for _, q := range []string{"STOP SLAVE", fmt.Sprintf("CHANGE MASTER TO MASTER_DELAY=%d", int(d/time.Second)), "START SLAVE"} {
		if err := r.exec(ctx, r.Replicas[i], q); err != nil {
			return err
		}
	}
	return nil
}

// Kill ends replica i's process with SIGKILL, as a crash does.
func (r *Replication) Kill(i int) {
	m := r.Replicas[i]
	if !m.Running() {
		return
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
	<-m.exited
}

// Start starts replica i again (after Kill or Stop) on its port and data dir; it resumes
// replicating by itself.
func (r *Replication) Start(i int) error {
	m := r.Replicas[i]
	if m.Running() {
		return nil
	}
	if err := m.start(); err != nil {
		return fmt.Errorf("start replica %d: %v\n%s", i+1, err, m.errorLogTail())
	}
	return nil
}

// WaitCaughtUp waits until every running replica has applied everything the primary has
// committed so far (MASTER_GTID_WAIT on the primary's @@gtid_binlog_pos).
func (r *Replication) WaitCaughtUp(ctx context.Context) error {
	var pos string
	if err := r.queryRow(ctx, r.Primary, "SELECT @@gtid_binlog_pos", &pos); err != nil {
		return err
	}
	for i, m := range r.Replicas {
		if !m.Running() {
			continue
		}
		secs := 60.0
		if dl, ok := ctx.Deadline(); ok {
			secs = max(time.Until(dl).Seconds(), 0.001)
		}
		var res int
		if err := r.queryRow(ctx, m, fmt.Sprintf("SELECT MASTER_GTID_WAIT('%s', %f)", pos, secs), &res); err != nil {
			return err
		}
		if res != 0 {
			return fmt.Errorf("replica %d did not reach the primary's position %s in time", i+1, pos)
		}
	}
	return nil
}
