package pgdialect_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/pgtest"
	_ "github.com/sqlpool/sqlpool/pgdialect"
	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/replica"
)

// pgReplicaBed is a PostgreSQL primary with one streaming standby (pg_basebackup) and a
// replica.Router over pgx pools on them.
type pgReplicaBed struct {
	primary, standby *pgtest.Server
	r                *replica.Router
	admin, sadmin    *sql.DB // the primary and the standby, outside the router
}

func newPGReplicaBed(t *testing.T, cfg replica.Config) *pgReplicaBed {
	t.Helper()
	b := &pgReplicaBed{primary: pgtest.Start(t)}
	b.standby = b.primary.StartStandby(t)
	b.admin, b.sadmin = b.primary.Admin(t), b.standby.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, q := range []string{
		"CREATE TABLE kv (k INT PRIMARY KEY, v BIGINT NOT NULL, c BIGINT NOT NULL)",
		"CREATE TABLE clock (id INT PRIMARY KEY, c BIGINT NOT NULL)",
		"INSERT INTO clock VALUES (1, 0)",
		"INSERT INTO kv SELECT k, 0, 0 FROM generate_series(0, 7) k",
	} {
		if _, err := b.admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var lsn string
	if err := b.admin.QueryRowContext(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	for {
		var ok bool
		if err := b.sadmin.QueryRowContext(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the standby did not replay the tables")
		case <-time.After(10 * time.Millisecond):
		}
	}
	// The chaos makes the pools and the router log every failed dial; the tests check errors.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	newPool := func(name string, s *pgtest.Server) *pool.Pool {
		p, err := pool.New(s.PgxConnector(t), pool.Config{Name: name, MaxConns: 20, AcquireTimeout: 2 * time.Second, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	cfg.Primary = newPool("pg-primary", b.primary)
	cfg.Replicas = []replica.Replica{{Name: b.standby.Addr(), Connector: newPool("pg-standby", b.standby)}}
	cfg.Flavor = replica.PostgreSQL
	cfg.Logger = quiet
	var err error
	if b.r, err = replica.New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.r.Close() })
	for !b.r.Stats().Replicas[0].Usable || b.r.Stats().Replicas[0].Position == "" {
		select {
		case <-ctx.Done():
			t.Fatalf("standby never usable: %+v", b.r.Stats())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return b
}

func pgWrite(ctx context.Context, db *sql.DB, k int) (int64, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var c int64
	if err := tx.QueryRowContext(ctx, "UPDATE clock SET c = c + 1 WHERE id = 1 RETURNING c").Scan(&c); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE kv SET v = v + 1, c = $1 WHERE k = $2", c, k); err != nil {
		return 0, err
	}
	return c, tx.Commit()
}

type pgQuerier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// pgRead returns the state a read saw: the clock, and checks every row is not ahead of it.
func pgRead(ctx context.Context, q pgQuerier) (int64, error) {
	var clock, maxRow int64
	err := q.QueryRowContext(ctx, "SELECT (SELECT c FROM clock WHERE id = 1), (SELECT max(c) FROM kv)").Scan(&clock, &maxRow)
	if err == nil && maxRow > clock {
		err = fmt.Errorf("a row at clock %d in a snapshot at %d", maxRow, clock)
	}
	return clock, err
}

func TestReplicaReadYourWritesPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a PostgreSQL primary and a standby")
	}
	b := newPGReplicaBed(t, replica.Config{Mode: replica.PerToken, WaitTimeout: 300 * time.Millisecond, RouteReadOnly: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tok := b.r.NewToken()
	tctx := replica.WithToken(ctx, tok)
	c, err := pgWrite(tctx, b.r.Writer(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := pgRead(tctx, b.r.Reader()); err != nil || got < c {
		t.Fatalf("token read: clock %d (%v) after committing %d", got, err, c)
	}
	if b.r.Stats().Replicas[0].Reads == 0 {
		t.Fatalf("the read did not go to the standby: %+v", b.r.Stats())
	}
	// Replay paused: the token read gives up on the standby and reads the primary; an unmarked
	// read stays on the standby and is stale.
	if _, err := b.sadmin.ExecContext(ctx, "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatal(err)
	}
	if c, err = pgWrite(tctx, b.r.Writer(), 2); err != nil {
		t.Fatal(err)
	}
	if got, err := pgRead(tctx, b.r.Reader()); err != nil || got < c {
		t.Fatalf("token read with replay paused: clock %d (%v) after committing %d", got, err, c)
	}
	if b.r.Stats().WaitTimeouts == 0 {
		t.Fatalf("no wait timed out: %+v", b.r.Stats())
	}
	// An autocommit write through QueryRow (UPDATE … RETURNING) is a commit too.
	if err := b.r.Writer().QueryRowContext(tctx, "UPDATE clock SET c = c + 1 WHERE id = 1 RETURNING c").Scan(&c); err != nil {
		t.Fatal(err)
	}
	if got, err := pgRead(tctx, b.r.Reader()); err != nil || got < c {
		t.Fatalf("token read after UPDATE … RETURNING with replay paused: clock %d (%v), committed %d", got, err, c)
	}
	if got, err := pgRead(ctx, b.r.Reader()); err != nil || got >= c {
		t.Fatalf("unmarked read with replay paused: clock %d (%v), committed %d: want stale", got, err, c)
	}
	// A routed read-only transaction waits for the standby to resume.
	done := make(chan error, 1)
	tok2, err := b.r.ParseToken(tok.String())
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		tx, err := b.r.Writer().BeginTx(replica.WithToken(ctx, tok2), &sql.TxOptions{ReadOnly: true})
		if err != nil {
			done <- err
			return
		}
		defer tx.Rollback()
		got, err := pgRead(ctx, tx)
		if err == nil && got < c {
			err = fmt.Errorf("read-only transaction: clock %d after %d", got, c)
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := b.sadmin.ExecContext(ctx, "SELECT pg_wal_replay_resume()"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("stats: %+v", b.r.Stats())
}

// TestReplicaFuzzPostgres: workers interleave writes and token reads (reader, reader
// transaction, routed writer read-only transaction; tokens in the context, per key and as
// text) while replay is paused 0–2 s at random and the standby is killed and restarted; no
// read may be older than its token. SQLPOOL_REPLICA_FUZZ_STEPS sets the steps (default 1500).
func TestReplicaFuzzPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a PostgreSQL primary and a standby, pauses and kills it")
	}
	steps := 1500
	if v, err := strconv.Atoi(os.Getenv("SQLPOOL_REPLICA_FUZZ_STEPS")); err == nil && v > 0 {
		steps = v
	}
	seed := uint64(time.Now().UnixNano() % 1e9)
	if v, err := strconv.Atoi(os.Getenv("SQLPOOL_REPLICA_FUZZ_SEED")); err == nil {
		seed = uint64(v)
	}
	b := newPGReplicaBed(t, replica.Config{Mode: replica.PerToken, WaitTimeout: 250 * time.Millisecond, RouteReadOnly: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	const workers = 6
	var (
		stale         atomic.Value // *errBox: the first failure
		nsteps, reads atomic.Int64
		inFlight      atomic.Int64
		killing       atomic.Int64
		killEnded     atomic.Int64
		wg            sync.WaitGroup
	)
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			tok, text, key := b.r.NewToken(), "", fmt.Sprintf("pgfuzz-%d", w)
			var lower int64
			for i := w; i < steps; i += workers {
				if stale.Load() != nil || ctx.Err() != nil {
					return
				}
				tctx := ctx
				switch w % 3 {
				case 0:
					tctx = replica.WithToken(ctx, tok)
				case 1:
					tctx = replica.WithKey(ctx, key)
				case 2:
					t2, err := b.r.ParseToken(text)
					if err != nil {
						stale.CompareAndSwap(nil, &errBox{err})
						return
					}
					tok, tctx = t2, replica.WithToken(ctx, t2)
				}
				nsteps.Add(1)
				var got int64 = -1
				var err error
				switch rng.IntN(4) {
				case 0:
					var c int64
					if c, err = pgWrite(tctx, b.r.Writer(), rng.IntN(8)); err == nil {
						lower = max(lower, c)
					}
				case 1:
					got, err = pgRead(tctx, b.r.Reader())
				case 2, 3:
					db := b.r.Reader()
					if rng.IntN(2) == 0 {
						db = b.r.Writer()
					}
					var tx *sql.Tx
					if tx, err = db.BeginTx(tctx, &sql.TxOptions{ReadOnly: true}); err == nil {
						got, err = pgRead(tctx, tx)
						_ = tx.Rollback()
					}
				}
				if w%3 == 2 {
					text = tok.String()
				}
				if err != nil {
					if killing.Load() > 0 || time.Since(time.Unix(0, killEnded.Load())) < time.Second {
						inFlight.Add(1) // a call on the standby killed under it
						continue
					}
					stale.CompareAndSwap(nil, &errBox{fmt.Errorf("worker %d step %d: %w", w, i, err)})
					return
				}
				if got >= 0 {
					reads.Add(1)
					if got < lower {
						stale.CompareAndSwap(nil, &errBox{fmt.Errorf("STALE: worker %d step %d saw clock %d, token needs %d", w, i, got, lower)})
						return
					}
					lower = got
				}
			}
		}()
	}
	done := make(chan struct{})
	var cwg sync.WaitGroup
	cwg.Add(1)
	go func() {
		defer cwg.Done()
		rng := rand.New(rand.NewPCG(seed, 99))
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			d := time.Duration(rng.IntN(2001)) * time.Millisecond
			if rng.IntN(8) == 0 {
				killing.Add(1)
				b.standby.Kill()
				select {
				case <-done:
				case <-time.After(d):
				}
				err := b.standby.Revive()
				killEnded.Store(time.Now().UnixNano())
				killing.Add(-1)
				if err != nil {
					stale.CompareAndSwap(nil, &errBox{err})
					return
				}
				continue
			}
			if _, err := b.sadmin.ExecContext(ctx, "SELECT pg_wal_replay_pause()"); err != nil {
				continue // the standby is starting
			}
			select {
			case <-done:
			case <-time.After(d):
			}
			_, _ = b.sadmin.ExecContext(ctx, "SELECT pg_wal_replay_resume()")
		}
	}()
	wg.Wait()
	close(done)
	cwg.Wait()
	if _, err := b.sadmin.ExecContext(ctx, "SELECT pg_wal_replay_resume()"); err != nil {
		t.Logf("resume: %v", err)
	}
	t.Logf("seed %d: %d steps, %d reads in %v, %d calls failed while the standby was killed under them; stats %+v",
		seed, nsteps.Load(), reads.Load(), time.Since(start).Round(time.Millisecond), inFlight.Load(), b.r.Stats())
	if e := stale.Load(); e != nil {
		t.Fatal(e.(*errBox).err)
	}
}

// errBox holds an error in an atomic.Value, which needs one concrete type.
type errBox struct{ err error }
