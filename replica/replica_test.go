package replica_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/replica"
)

func TestReadYourWritesMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a MariaDB primary and two replicas")
	}
	b := newBed(t, replica.Config{Mode: replica.PerToken, WaitTimeout: 300 * time.Millisecond, RouteReadOnly: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Caught up: a token read after a write sees it, on a replica.
	tok := b.r.NewToken()
	tctx := replica.WithToken(ctx, tok)
	c, err := write(tctx, b.r.Writer(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Position() == nil || tok.Position().String() == "" {
		t.Fatalf("token has no position after a commit: %v", tok)
	}
	s, err := readSnapshot(tctx, b.r.Reader())
	if err != nil {
		t.Fatal(err)
	}
	if s.clock < c {
		t.Fatalf("stale read: clock %d after committing %d", s.clock, c)
	}
	st := b.r.Stats()
	if st.Replicas[0].Reads+st.Replicas[1].Reads == 0 {
		t.Fatalf("the read did not go to a replica: %+v", st)
	}

	// Both replicas stopped applying: the token read waits, gives up after WaitTimeout and
	// reads the primary; an unmarked read stays on a replica and is stale.
	for i := range 2 {
		if err := b.repl.PauseApply(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	c, err = write(tctx, b.r.Writer(), 2)
	if err != nil {
		t.Fatal(err)
	}
	s, err = readSnapshot(tctx, b.r.Reader())
	if err != nil {
		t.Fatal(err)
	}
	if s.clock < c {
		t.Fatalf("stale token read while replicas are paused: clock %d after committing %d", s.clock, c)
	}
	if got := b.r.Stats().WaitTimeouts; got == 0 {
		t.Fatalf("no wait timed out: %+v", b.r.Stats())
	}
	u, err := readSnapshot(ctx, b.r.Reader())
	if err != nil {
		t.Fatal(err)
	}
	if u.clock >= c {
		t.Fatalf("unmarked read saw clock %d with both replicas paused before %d: did it go to the primary?", u.clock, c)
	}
	// The token as text, as another instance would get it from a cookie.
	tok2, err := b.r.ParseToken(tok.String())
	if err != nil {
		t.Fatal(err)
	}
	// A read-only transaction on the writer goes to a replica as a token read would.
	done := make(chan error, 1)
	go func() {
		tx, err := b.r.Writer().BeginTx(replica.WithToken(ctx, tok2), &sql.TxOptions{ReadOnly: true})
		if err != nil {
			done <- err
			return
		}
		defer tx.Rollback()
		s, err := readSnapshot(ctx, tx)
		if err == nil && s.clock < c {
			t.Errorf("stale read-only transaction: clock %d after %d", s.clock, c)
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // it is waiting on a replica now
	if err := b.repl.ResumeApply(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := b.repl.ResumeApply(ctx, 1); err != nil {
		t.Fatal(err)
	}
	st = b.r.Stats()
	if st.Replicas[0].Waits+st.Replicas[1].Waits == 0 {
		t.Fatalf("no read waited: %+v", st)
	}

	// Prepared statements (database/sql prepares again on the borrow's server connection):
	// a write through a writer statement, read back through a reader statement, with both
	// replicas paused.
	wst, err := b.r.Writer().PrepareContext(ctx, "UPDATE clock SET c = c + 1 WHERE id = 1")
	if err != nil {
		t.Fatal(err)
	}
	defer wst.Close()
	rst, err := b.r.Reader().PrepareContext(ctx, "SELECT c FROM clock WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	defer rst.Close()
	for i := range 2 {
		if err := b.repl.PauseApply(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		if _, err := wst.ExecContext(tctx); err != nil {
			t.Fatal(err)
		}
		var want, got int64
		if err := b.direct.QueryRowContext(ctx, "SELECT c FROM clock WHERE id = 1").Scan(&want); err != nil {
			t.Fatal(err)
		}
		if err := rst.QueryRowContext(tctx, 1).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("round %d: prepared token read saw clock %d, the primary has %d", round, got, want)
		}
	}
	for i := range 2 {
		if err := b.repl.ResumeApply(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("stats: %+v", b.r.Stats())

	// Where each kind of call runs, by @@server_id (primary 1, replicas 2 and 3).
	if err := b.repl.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	serverID := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) int {
		t.Helper()
		var id int
		if err := q.QueryRowContext(ctx, "SELECT @@server_id").Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	if id := serverID(b.r.Writer()); id != 1 {
		t.Errorf("a query on the writer ran on server %d, want the primary (1)", id)
	}
	if id := serverID(b.r.Reader()); id == 1 {
		t.Errorf("a query on the reader ran on the primary")
	}
	tx, err := b.r.Writer().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if id := serverID(tx); id == 1 {
		t.Errorf("a read-only transaction on the writer (RouteReadOnly) ran on the primary")
	}
	_ = tx.Rollback()
	conn, err := b.r.Writer().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "DO 1"); err != nil {
		t.Fatal(err)
	}
	if tx, err = conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	if id := serverID(tx); id != 1 {
		t.Errorf("a read-only transaction that is not its borrow's first call ran on server %d, want the primary", id)
	}
	_ = tx.Rollback()
	_ = conn.Close()
}

func TestPoolWideMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a MariaDB primary and two replicas")
	}
	b := newBed(t, replica.Config{Mode: replica.PoolWide, WaitTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.repl.SetDelay(ctx, 0, time.Second); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		c, err := write(ctx, b.r.Writer(), i%8)
		if err != nil {
			t.Fatal(err)
		}
		s, err := readSnapshot(ctx, b.r.Reader())
		if err != nil {
			t.Fatal(err)
		}
		if s.clock < c {
			t.Fatalf("pool-wide read %d: clock %d after committing %d", i, s.clock, c)
		}
	}
	t.Logf("stats: %+v", b.r.Stats())
}

// A replica further behind than MaxReplicaLag gets no reads, and gets them again once it has
// caught up.
func TestMaxReplicaLagMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a MariaDB primary and two replicas")
	}
	b := newBed(t, replica.Config{Mode: replica.None, MaxReplicaLag: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.repl.PauseApply(ctx, 0); err != nil {
		t.Fatal(err)
	}
	// Commits the paused replica does not apply, for longer than MaxReplicaLag.
	deadline := time.Now().Add(30 * time.Second)
	for b.r.Stats().Replicas[0].Usable {
		if time.Now().After(deadline) {
			t.Fatalf("the paused replica is still in rotation: %+v", b.r.Stats())
		}
		if _, err := write(ctx, b.r.Writer(), 0); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	lag := b.r.Stats().Replicas[0].Lag
	before := b.r.Stats().Replicas[0].Reads
	for range 50 {
		if _, err := readSnapshot(ctx, b.r.Reader()); err != nil {
			t.Fatal(err)
		}
	}
	st := b.r.Stats()
	if st.Replicas[0].Reads != before {
		t.Errorf("the lagging replica (lag %v) got %d reads", lag, st.Replicas[0].Reads-before)
	}
	if err := b.repl.ResumeApply(ctx, 0); err != nil {
		t.Fatal(err)
	}
	back := b.waitUsable(t, ctx, 0, true)
	t.Logf("out of rotation at lag %v; back %v after its SQL thread started", lag, back)
}
