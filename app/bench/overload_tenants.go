package bench

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sqlpool/sqlpool/pool"
)

// The overload benchmark's tenants scenario (docs/design/tenants.md): two tenants of short
// statements, a loud one offering ten times the quiet one's load, together twice the capacity
// measured right before each configuration (-load). Per configuration, two phases of warm-up +
// duration each: the quiet tenant alone at its rate, then both tenants. Reported: the quiet tenant's
// p50/p99 alone and together (over all its requests: one that did not finish counts as its
// deadline), their ratio, what each tenant finished, and the total finished as a fraction of
// the capacity.
//
// Configurations are the command's -configs; the variant "tenants" (pool-4-tenants) sets
// Config.Tenants to overloadTenants, and here a pool configuration may name several variants
// (pool-64-tenants-control); "capped", after "tenants", caps the loud tenant at half the pool
// (pool-4-tenants-capped). Without it the pool serves all waiters first come, first served;
// the requests carry the tenant key either way.

// overloadTenants are the scenario's two tenants, at weight 1 each.
var overloadTenants = map[string]pool.Tenant{"quiet": {}, "loud": {}}

// tenantsScenario runs the tenants scenario's round r when name is "tenants" and reports
// whether it did, and the command's exit code (0: go on).
func tenantsScenario(name string, r int, conn driver.Connector, mon *sql.DB, short *OverloadClass, configs string,
	factor float64, warm, dur, deadline time.Duration, stdout, stderr io.Writer) (bool, int) {
	if name != "tenants" {
		return false, 0
	}
	if r == 1 {
		fmt.Fprintln(stdout, "round\tscenario\tconfig\tcapacity/s\tquiet/s\tloud/s\tquiet p50 alone\tquiet p99 alone\tquiet p50 together\tquiet p99 together\tp99 ratio\tquiet finished/s together\tloud finished/s\ttotal/capacity\tquiet failed\tloud failed\tserver conns/s\tpool stats")
	}
	cl := &OverloadClass{Name: "short", Share: 1, loops: short.loops}
	names := strings.Split(configs, ",")
	k := (r - 1) % len(names)
	for _, cn := range append(names[k:], names[:k]...) {
		open, err := tenantsTarget(strings.TrimSpace(cn))
		if err != nil {
			fmt.Fprintln(stderr, "overload:", err)
			return true, 2
		}
		// Capacity right before each configuration: on a shared machine it moves within a round.
		x, err := measureCapacity(conn, mon, overloadScenario{Name: "short", Classes: []*OverloadClass{cl}}, max(dur/4, time.Second))
		if err != nil {
			fmt.Fprintln(stderr, "overload: tenants: measuring capacity:", err)
			return true, 1
		}
		quietRate := factor * x / 11
		alone, err := runTenants(conn, mon, open, cl.query(), quietRate, 0, warm, dur, deadline)
		if err != nil {
			fmt.Fprintf(stderr, "overload: tenants %s alone: %v\n", cn, err)
			return true, 1
		}
		both, err := runTenants(conn, mon, open, cl.query(), quietRate, 10*quietRate, warm, dur, deadline)
		if err != nil {
			fmt.Fprintf(stderr, "overload: tenants %s together: %v\n", cn, err)
			return true, 1
		}
		qa, qb := alone.tenant["quiet"], both.tenant["quiet"]
		lb := both.tenant["loud"]
		ratio := float64(qb.p99) / float64(max(qa.p99, time.Microsecond))
		fmt.Fprintf(stdout, "%d\ttenants\t%s\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%.0f\t%.0f\t%.2f\t%d\t%d\t%.1f\t%s\n",
			r, cn, x, quietRate, 10*quietRate, ms(qa.p50), ms(qa.p99), ms(qb.p50), ms(qb.p99), ratio,
			qb.finished/dur.Seconds(), lb.finished/dur.Seconds(), (qb.finished+lb.finished)/dur.Seconds()/x,
			qb.failed, lb.failed, both.conns, both.stats)
	}
	return true, 0
}

// tenantsTarget opens configuration name for the tenants scenario.
func tenantsTarget(name string) (func(driver.Connector) (*sql.DB, *pool.Pool, error), error) {
	parts := strings.Split(name, "-")
	if parts[0] != "pool" || len(parts) < 3 {
		t, err := overloadConfig(name)
		return t.open, err
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < 1 {
		return nil, fmt.Errorf("configuration %q: bad size", name)
	}
	cfg := pool.Config{Name: "overload-" + name, MaxConns: n, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Trace: &pool.Trace{Closed: func(_ string, r pool.CloseReason) { closeReasons.note(string(r)) }}}
	for _, v := range parts[2:] {
		if v == "capped" { // both tenants, the loud one capped at half the pool (after "tenants")
			cfg.Tenants = map[string]pool.Tenant{"quiet": {}, "loud": {Cap: max(n/2, 1)}}
			continue
		}
		if err := overloadVariant(&cfg, v); err != nil {
			return nil, fmt.Errorf("configuration %q: %w", name, err)
		}
	}
	return func(c driver.Connector) (*sql.DB, *pool.Pool, error) {
		p, err := pool.New(c, cfg)
		if err != nil {
			return nil, nil, err
		}
		return p.OpenDB(), p, nil
	}, nil
}

type tenantOutcome struct {
	finished float64
	failed   int
	p50, p99 time.Duration
}

type tenantsResult struct {
	tenant map[string]tenantOutcome
	conns  float64 // server connections opened/s
	stats  string
}

// runTenants runs one phase: Poisson arrivals of the quiet tenant at quiet/s and the loud one
// at loud/s, for warm+dur, recording the requests that arrive after warm.
func runTenants(c driver.Connector, mon *sql.DB, open func(driver.Connector) (*sql.DB, *pool.Pool, error), query string,
	quiet, loud float64, warm, dur, deadline time.Duration) (tenantsResult, error) {
	if err := awaitQuiet(mon); err != nil {
		return tenantsResult{}, err
	}
	db, p, err := open(c)
	if err != nil {
		return tenantsResult{}, err
	}
	defer func() {
		_ = db.Close()
		if p != nil {
			_ = p.Close()
		}
	}()
	if err := fillConnections(db, p); err != nil {
		return tenantsResult{}, err
	}
	closeReasons.take()
	type rec struct {
		loud bool
		lat  time.Duration // deadline when it did not finish
		ok   bool
	}
	var (
		mu   sync.Mutex
		recs []rec
		wg   sync.WaitGroup
	)
	quietErr := &firstErr{}
	ctxs := map[bool]context.Context{
		false: pool.WithTenant(context.WithValue(context.Background(), tenantDebugKey{}, quietErr), "quiet"),
		true:  pool.WithTenant(context.Background(), "loud"),
	}
	rate := quiet + loud
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	start := time.Now()
	measureFrom := start.Add(warm)
	end := measureFrom.Add(dur)
	var conns0 int64
	measuring := false
	for next := start; next.Before(end); next = next.Add(time.Duration(rng.ExpFloat64() / rate * 1e9)) {
		if !measuring && !next.Before(measureFrom) {
			measuring = true
			if conns0, err = serverConnections(mon); err != nil {
				return tenantsResult{}, err
			}
		}
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		arrival, isLoud, record := next, rng.Float64()*rate >= quiet, measuring
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat, ok := tenantRequest(ctxs[isLoud], db, query, arrival, deadline)
			if record {
				mu.Lock()
				recs = append(recs, rec{loud: isLoud, lat: lat, ok: ok})
				mu.Unlock()
			}
		}()
	}
	conns1, err := serverConnections(mon)
	if err != nil {
		return tenantsResult{}, err
	}
	wg.Wait()
	res := tenantsResult{tenant: map[string]tenantOutcome{}, conns: float64(conns1-conns0) / dur.Seconds()}
	for _, loud := range []bool{false, true} {
		var lats []time.Duration
		var o tenantOutcome
		for _, r := range recs {
			if r.loud != loud {
				continue
			}
			lats = append(lats, r.lat)
			if r.ok {
				o.finished++
			} else {
				o.failed++
			}
		}
		slices.Sort(lats)
		if len(lats) > 0 {
			o.p50 = lats[min(len(lats)/2, len(lats)-1)]
			o.p99 = lats[min(int(0.99*float64(len(lats))), len(lats)-1)]
		}
		res.tenant[map[bool]string{false: "quiet", true: "loud"}[loud]] = o
	}
	if p != nil {
		st := p.Stats()
		var ts []string
		for _, t := range st.Tenants {
			ts = append(ts, fmt.Sprintf("%s:acq=%d,failed=%d", t.Key, t.Acquires, t.Failed))
		}
		res.stats = fmt.Sprintf("closed[%s] created=%d timeouts=%d shed=%d tenants[%s]",
			closeReasons.take(), st.Created, st.Timeouts, st.Shed, strings.Join(ts, " "))
		if quietErr.err != nil {
			res.stats += " quiet's first error: " + quietErr.err.Error()
		}
	}
	return res, nil
}

// tenantRequest is one request of a tenant (ctx carries its key): borrow, run, read the rows,
// all within deadline from arrival. It returns the latency from arrival and whether it
// finished; one that did not counts as its deadline.
func tenantRequest(parent context.Context, db *sql.DB, query string, arrival time.Time, deadline time.Duration) (time.Duration, bool) {
	ctx, cancel := context.WithDeadline(parent, arrival.Add(deadline))
	defer cancel()
	cn, err := db.Conn(ctx)
	if err != nil {
		if t, _ := parent.Value(tenantDebugKey{}).(*firstErr); t != nil {
			t.once.Do(func() { t.err = err })
		}
		return deadline, false
	}
	defer cn.Close()
	rows, err := cn.QueryContext(ctx, query)
	if err == nil {
		for rows.Next() {
			var v int64
			if err = rows.Scan(&v); err != nil {
				break
			}
		}
		if err == nil {
			err = rows.Err()
		}
		_ = rows.Close()
	}
	if err != nil {
		return deadline, false
	}
	return time.Since(arrival), true
}

type tenantDebugKey struct{}

type firstErr struct {
	once sync.Once
	err  error
}
