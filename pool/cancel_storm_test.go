package pool_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/pool"
)

// EnvCancelStormSeconds sets how long TestServerCancelStorm runs (default 5 s; the figures in
// docs/operations.md are from 60).
const envCancelStormSeconds = "SQLPOOL_CANCEL_STORM_SECONDS"

// A cancel storm: MaxConns 16, statements SELECT SLEEP(0.05–0.5 s), contexts of 20–200 ms, 32
// goroutines per side starting up to 250 statements a second (about 200 cancels a second), run at the same time through the pool and through plain database/sql
// (SetMaxOpenConns(16)) on the same server. The processlist is sampled every 10 ms: the
// server threads running the pool's statements never exceed MaxConns + MaxConns/8 (cancelled
// sessions whose replacements were dialled at once) + 1; plain
// database/sql's figure is logged beside it (it is not bounded: every cancel leaves a sleeping
// thread behind and a new connection is opened).
func TestServerCancelStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: load test on a real server")
	}
	mysqltest.RequireMariaDB(t, "the cancel storm samples a real server's processlist")
	dur := 5 * time.Second
	if s := os.Getenv(envCancelStormSeconds); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive number of seconds", envCancelStormSeconds, s)
		}
		dur = time.Duration(n) * time.Second
	}
	const maxConns, workers, startRate = 16, 32, 250
	dsn := mysqltest.DSN(t)
	admin := cancelAdmin(t, dsn)
	admin.SetMaxOpenConns(1)
	ev := &cancelRecorder{}
	p := newMySQLPool(t, dsn, pool.Config{Name: "storm", MaxConns: maxConns, AcquireTimeout: time.Minute, Trace: ev.trace()})
	pdb := p.OpenDB()
	defer pdb.Close()
	plain := sql.OpenDB(mysqlConnector(t, dsn))
	plain.SetMaxOpenConns(maxConns)
	plain.SetMaxIdleConns(maxConns)
	defer plain.Close()
	tag := fmt.Sprintf("sqlpool_storm_%d", time.Now().UnixNano())
	tagPool, tagPlain := tag+"_pool", tag+"_plain"
	defer killTagged(t, admin, tagPlain)

	type side struct {
		db                 *sql.DB
		tag                string
		runs, cancels, bad atomic.Int64
	}
	sides := []*side{{db: pdb, tag: tagPool}, {db: plain, tag: tagPlain}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range sides {
		// Statements start at up to startRate a second (a start is skipped when every worker
		// is busy), so that each side sees about 200 cancels a second.
		starts := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second / startRate)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					select {
					case starts <- struct{}{}:
					default:
					}
				}
			}
		}()
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), uint64(len(s.tag))))
				for {
					select {
					case <-stop:
						return
					case <-starts:
					}
					sleep := 0.05 + 0.45*r.Float64()
					timeout := time.Duration(20+r.IntN(181)) * time.Millisecond
					ctx, cancel := context.WithTimeout(context.Background(), timeout)
					var n int64
					err := s.db.QueryRowContext(ctx, fmt.Sprintf("/* %s */ SELECT SLEEP(%.3f)", s.tag, sleep)).Scan(&n)
					cancel()
					s.runs.Add(1)
					switch {
					case err == nil:
					case ctx.Err() != nil:
						s.cancels.Add(1)
					default:
						s.bad.Add(1)
					}
				}
			}()
		}
	}

	// Sample the processlist every 10 ms.
	var maxPool, maxPlain, samples int64
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	for time.Since(start) < dur {
		<-tick.C
		var np, nq sql.NullInt64
		err := admin.QueryRow("SELECT SUM(INFO LIKE ?), SUM(INFO LIKE ?) FROM information_schema.PROCESSLIST WHERE INFO NOT LIKE '%PROCESSLIST%'",
			"%"+tagPool+"%", "%"+tagPlain+"%").Scan(&np, &nq)
		if err != nil {
			t.Errorf("sampling the processlist: %v", err)
			break
		}
		samples++
		maxPool, maxPlain = max(maxPool, np.Int64), max(maxPlain, nq.Int64)
	}
	tick.Stop()
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	for _, s := range sides {
		t.Logf("%s: %d statements, %d cancelled (%.0f/s), %d other errors", s.tag[len(tag)+1:], s.runs.Load(),
			s.cancels.Load(), float64(s.cancels.Load())/elapsed.Seconds(), s.bad.Load())
	}
	st := p.Stats()
	t.Logf("storm %v, %d samples: max concurrent server threads running the pool's statements %d (MaxConns %d); plain database/sql's %d (SetMaxOpenConns %d); pool cancels %v; pool created %d connections",
		elapsed.Round(time.Millisecond), samples, maxPool, maxConns, maxPlain, maxConns, ev.all(), st.Created)
	if bound := int64(maxConns + maxConns/8 + 1); maxPool > bound {
		t.Errorf("the pool's statements ran on up to %d server threads at once, want ≤ MaxConns+MaxConns/8+1 = %d", maxPool, bound)
	}
	if sides[0].cancels.Load() == 0 {
		t.Error("no statement was cancelled: the storm did not happen")
	}
	if n := sides[0].bad.Load(); n != 0 {
		t.Errorf("%d of the pool's statements failed with an error other than their context's", n)
	}
}
