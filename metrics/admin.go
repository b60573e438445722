package metrics

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Timer summarises one histogram: what an admin page shows of a timer. Quantiles are
// approximated from the buckets the way PromQL's histogram_quantile does (linear within the
// bucket); a quantile that falls in the +Inf bucket is reported as the highest finite bound.
type Timer struct {
	Count       uint64  `json:"count"`
	SumSeconds  float64 `json:"sum_seconds"`
	MeanSeconds float64 `json:"mean_seconds"`
	P50Seconds  float64 `json:"p50_seconds"`
	P99Seconds  float64 `json:"p99_seconds"`
	// MaxSeconds is the windowed maximum (the _max gauge), not a lifetime maximum.
	MaxSeconds float64 `json:"max_seconds"`
}

// PoolSnapshot is one pool in a Snapshot.
type PoolSnapshot struct {
	Name string `json:"name"`
	// Registered is false for a pool seen only through its events (Register not called): it
	// has no gauges or Stats counters.
	Registered bool `json:"registered"`

	Total    int `json:"total"`
	Active   int `json:"active"`
	Idle     int `json:"idle"`
	Waiting  int `json:"waiting"`
	MaxConns int `json:"max_conns"`
	MinIdle  int `json:"min_idle"`

	Acquires           uint64 `json:"acquires"`
	Timeouts           uint64 `json:"timeouts"`
	Exhausted          uint64 `json:"exhausted"`
	Created            uint64 `json:"created"`
	Closed             uint64 `json:"closed"`
	Validations        uint64 `json:"validations"`
	ProbeFailures      uint64 `json:"probe_failures"`
	ReleasePlans       uint64 `json:"release_plans"`
	LeakedStatements   uint64 `json:"leaked_statements"`
	StatementCacheFull uint64 `json:"statement_cache_full"`
	LastError          string `json:"last_error,omitempty"`

	Acquire  Timer `json:"acquire"`
	Usage    Timer `json:"usage"`
	Creation Timer `json:"creation"`
	// ClosedBy counts closes by reason, from the pool's events.
	ClosedBy map[string]uint64 `json:"closed_by"`
}

// StatementSnapshot is one statement timer in a Snapshot.
type StatementSnapshot struct {
	Pool string `json:"pool"`
	Name string `json:"name"`
	Timer
	// Errors counts errors by class; absent when there were none.
	Errors map[string]uint64 `json:"errors,omitempty"`
}

// Snapshot is the JSON document AdminHandler serves.
type Snapshot struct {
	Time  time.Time      `json:"time"`
	Pools []PoolSnapshot `json:"pools"`
	// Statements are sorted by total time, largest first.
	Statements []StatementSnapshot `json:"statements"`
}

// Snapshot returns the pools' stats and timers and the statement timers, now. It reads the
// same data as a scrape (and rotates the _max windows as a scrape does).
func (m *Metrics) Snapshot() Snapshot {
	m.readMu.Lock()
	defer m.readMu.Unlock()
	now := m.clock.Now()
	snap := Snapshot{Time: now, Pools: []PoolSnapshot{}, Statements: []StatementSnapshot{}}
	for name, pm := range *m.pools.Load() {
		ps := PoolSnapshot{
			Name:     name,
			Acquire:  timerOf(pm.acquire, pm.acquireMax.read(now, m.window)),
			Usage:    timerOf(pm.usage, pm.usageMax.read(now, m.window)),
			Creation: timerOf(pm.creation, pm.creationMax.read(now, m.window)),
			ClosedBy: map[string]uint64{},
		}
		for i, c := range pm.closed {
			if c != nil {
				if v := counterValue(c); v > 0 {
					ps.ClosedBy[string(closeReasons[i])] = v
				}
			}
		}
		if p := pm.src.Load(); p != nil {
			st := p.Stats()
			ps.Registered = true
			ps.Total, ps.Active, ps.Idle, ps.Waiting, ps.MaxConns = st.Total, st.Active, st.Idle, st.Waiting, st.MaxConns
			ps.MinIdle = int(pm.min.Load())
			ps.Acquires, ps.Timeouts, ps.Exhausted = st.Acquires, st.Timeouts, st.Exhausted
			ps.Created, ps.Closed = st.Created, st.Closed
			ps.Validations, ps.ProbeFailures = st.Validations, st.ProbeFailures
			ps.ReleasePlans, ps.LeakedStatements, ps.StatementCacheFull = st.ReleasePlans, st.LeakedStatements, st.StatementCacheFull
			if st.LastError != nil {
				ps.LastError = st.LastError.Error()
			}
		}
		snap.Pools = append(snap.Pools, ps)
		if pm.stmts == nil {
			continue
		}
		for _, s := range pm.stmts.all() {
			ss := StatementSnapshot{Pool: name, Name: s.name, Timer: timerOf(s.hist, s.max.read(now, m.window))}
			for c := range s.errs {
				if p := s.errs[c].Load(); p != nil {
					if v := counterValue(*p); v > 0 {
						if ss.Errors == nil {
							ss.Errors = map[string]uint64{}
						}
						ss.Errors[classNames[c]] = v
					}
				}
			}
			snap.Statements = append(snap.Statements, ss)
		}
	}
	slices.SortFunc(snap.Pools, func(a, b PoolSnapshot) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(snap.Statements, func(a, b StatementSnapshot) int {
		if c := cmp.Compare(b.SumSeconds, a.SumSeconds); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Pool, b.Pool), cmp.Compare(a.Name, b.Name))
	})
	return snap
}

// AdminHandler returns an http.Handler that serves Snapshot as JSON, for an admin page.
// Query parameters: pool=NAME keeps one pool (and its statements); top=N keeps the N
// statements with the largest total time.
func (m *Metrics) AdminHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		snap := m.Snapshot()
		if name := r.URL.Query().Get("pool"); name != "" {
			snap.Pools = slices.DeleteFunc(snap.Pools, func(p PoolSnapshot) bool { return p.Name != name })
			snap.Statements = slices.DeleteFunc(snap.Statements, func(s StatementSnapshot) bool { return s.Pool != name })
		}
		if top := r.URL.Query().Get("top"); top != "" {
			n, err := strconv.Atoi(top)
			if err != nil || n < 0 {
				http.Error(w, "top: want a non-negative integer", http.StatusBadRequest)
				return
			}
			snap.Statements = snap.Statements[:min(n, len(snap.Statements))]
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(snap)
	})
}

func counterValue(c prometheus.Counter) uint64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil || d.Counter == nil {
		return 0
	}
	return uint64(d.Counter.GetValue())
}

// timerOf summarises a histogram and its window max.
func timerOf(h *histogram, maxD time.Duration) Timer {
	d := h.read()
	t := Timer{Count: d.count, SumSeconds: d.sumSeconds, MaxSeconds: maxD.Seconds()}
	if t.Count > 0 {
		t.MeanSeconds = t.SumSeconds / float64(t.Count)
	}
	t.P50Seconds = d.quantile(0.5, h.b.seconds)
	t.P99Seconds = d.quantile(0.99, h.b.seconds)
	return t
}
