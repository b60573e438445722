package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// openLoop is one step of the open-loop generator: requests are due at
// fixed times (start + i/rate) whatever happened to earlier ones, and each
// one's latency is measured from the time it was due, not from when it was
// sent. A server that stalls therefore shows its stall in every request
// that should have been sent meanwhile (no coordinated omission), and a
// generator that falls behind shows up the same way (its own lag is
// reported as well).
type openLoop struct {
	BaseURL  string        // http://host:port
	Rate     float64       // POSTs per second
	Duration time.Duration // how long requests are scheduled
	// QueryRate is the GETs per second of the query mix run alongside
	// (services, span names, traces by service, traces by tag); 0: none.
	QueryRate float64
	// Timeout bounds each request; one that takes longer counts as an
	// error with latency Timeout. Zero: 10 s.
	Timeout time.Duration
	// MaxInFlight bounds the requests outstanding at once; a due request
	// that finds no slot waits for one (and its latency keeps counting).
	// Zero: 4096.
	MaxInFlight int
	// SpreadMicros, when positive, gives each trace a start time drawn
	// uniformly from [now-SpreadMicros, now) instead of its due time (the
	// query benchmark spreads its data over a day).
	SpreadMicros int64
	// AgeMicros shifts every start time that far into the past.
	AgeMicros int64
	Seed      uint64
	// WarmUp is the start of the step whose requests are sent but not
	// recorded (new connections, cold caches). Zero: none.
	WarmUp time.Duration
	// CountDSN, when set, is a MariaDB DSN on which the generator counts
	// the step's own spans in zipkin_spans when its last POST has been
	// answered, for the stored spans/s of exactly the step.
	CountDSN string
	// Payload is what the POSTs carry: payloadJSON (or ""), Zipkin JSON v2
	// to /api/v2/spans, answered 202; payloadOTelJSON, the same with the
	// tags of OpenTelemetry's Zipkin exporter; or payloadOTLP, the same
	// traces as OTLP/HTTP protobuf to /v1/traces, answered 200
	// (otlpenc.go).
	Payload string
	// Closed, when positive, makes the step a closed loop of Closed
	// senders instead of a schedule: each POSTs a trace, waits for the
	// answer, waits Backoff after a 503 (as a reporter backs off), and
	// sends the next, until Duration. Latency is then measured from the
	// send, and Rate and MaxInFlight are ignored. Zero: the open loop.
	Closed int
	// Backoff is a closed-loop sender's pause after a 503. Zero: 20 ms.
	Backoff time.Duration
	// RandomIDs draws each trace ID's low half at random instead of
	// counting it up, so that the trace-keyed indexes are written at
	// random places as the ingest-limit benchmark's raw rows are (a
	// counter writes them in order, which is cheaper for the database).
	RandomIDs bool
}

// Latency is a latency distribution in milliseconds.
type Latency struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	P999 float64 `json:"p999_ms"`
	Max  float64 `json:"max_ms"`
}

// summarize returns the distribution of d (which it sorts).
func summarize(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	ms := func(x time.Duration) float64 { return math.Round(float64(x)/1e3) / 1e3 }
	return Latency{N: len(d), P50: ms(percentile(d, 50)), P99: ms(percentile(d, 99)),
		P999: ms(percentile(d, 99.9)), Max: ms(d[len(d)-1])}
}

// percentile returns the nearest-rank p-th percentile of sorted d.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(len(sorted))/100 - 1e-9))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// StepResult is what one open-loop step measured from the client side.
type StepResult struct {
	Offered float64 `json:"offered_rps"`
	Sent    int     `json:"sent"`
	// Accepted counts the POSTs answered with the payload's success
	// status: 202 for JSON v2, 200 for OTLP.
	Accepted int `json:"accepted_202"`
	// AcceptedAll counts the 202s of the warm-up too.
	AcceptedAll int `json:"accepted_202_incl_warmup"`
	Rejected    int `json:"rejected_503"`
	OtherHTTP   int `json:"other_status"`
	Errors      int `json:"errors"` // transport errors and timeouts
	// Completed is the POSTs answered per second (any status).
	Completed float64 `json:"completed_rps"`
	// Latency of every POST from its due time, whatever its answer.
	Latency Latency `json:"latency"`
	// Latency of the 202s only.
	Latency202 Latency `json:"latency_202"`
	// Samples202 are the 202s' latencies in ms, in the order answered.
	Samples202 []float64 `json:"samples_202_ms,omitempty"`
	// MaxLag is how late the generator dispatched its latest request.
	MaxLagMs float64 `json:"max_generator_lag_ms"`
	// StoredPerSec is the step's spans stored in zipkin_spans from its start until its last
	// POST was answered, per second (CountDSN).
	StoredPerSec float64 `json:"stored_spans_per_s"`
	// QueriesUnfinished are GETs still running 2 s after the step; their
	// time so far is recorded as their latency.
	QueriesUnfinished int                `json:"queries_unfinished"`
	Queries           map[string]Latency `json:"queries,omitempty"`
	QueryErr          int                `json:"query_errors"`
	Seconds           float64            `json:"seconds"`
}

// queryKinds are the GETs of the query mix, in rotation.
var queryKinds = []string{"services", "spans", "traces_by_service", "traces_by_tag"}

func queryPath(kind string, rng *rand.Rand) string {
	svc := ServiceName(rng.IntN(NumServices))
	switch kind {
	case "services":
		return "/api/v2/services"
	case "spans":
		return "/api/v2/spans?serviceName=" + url.QueryEscape(svc)
	case "traces_by_service":
		return "/api/v2/traces?serviceName=" + url.QueryEscape(svc) + "&lookback=3600000&limit=10"
	default:
		return "/api/v2/traces?serviceName=" + url.QueryEscape(svc) +
			"&annotationQuery=" + url.QueryEscape("http.status_code=500") + "&lookback=3600000&limit=10"
	}
}

type sample struct {
	d      time.Duration
	status int // 0: transport error
}

// run executes the step and returns its result.
func (o *openLoop) run(ctx context.Context) StepResult {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	maxIn := o.MaxInFlight
	if maxIn == 0 {
		maxIn = 4096
	}
	// Idle connections are closed after 20 s, before the server's idle
	// timeout (30 s by default) closes them: a POST sent on a connection
	// the server is closing fails in transport, and is not retried.
	tr := &http.Transport{MaxIdleConns: maxIn, MaxIdleConnsPerHost: maxIn, IdleConnTimeout: 20 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: timeout}

	var mu sync.Mutex
	posts := make([]sample, 0, int(o.Rate*o.Duration.Seconds())+16)
	queries := map[string][]time.Duration{}
	queryErr, unfinished, acceptedAll := 0, 0, 0
	var maxLag time.Duration

	ids := newTraceIDs()
	slots := make(chan struct{}, maxIn)
	var postWG, queryWG sync.WaitGroup
	qctx, qcancel := context.WithCancel(ctx)
	defer qcancel()
	var lastDone time.Time

	// Stored spans are counted by the step's own trace IDs: every trace of a step shares one
	// random high half (ids), and zipkin_spans' unique key starts with trace_id_high, so the
	// count reads only this step's rows. (A COUNT(*) of the whole table costs MariaDB seconds
	// of CPU once it holds millions of rows — on the core ingest needs — and grew with every
	// step.)
	var count func() int64
	if o.CountDSN != "" {
		db, err := sql.Open("mysql", o.CountDSN)
		if err == nil {
			defer db.Close()
			count = func() int64 {
				var n int64
				_ = db.QueryRow("SELECT COUNT(*) FROM zipkin_spans WHERE trace_id_high = ?", int64(ids.high)).Scan(&n)
				return n
			}
		}
	}
	var tc1 time.Time
	start := time.Now().Add(20 * time.Millisecond)
	end := start.Add(o.Duration)
	warm := start.Add(o.WarmUp)

	schedule := func(wg *sync.WaitGroup, rate float64, fire func(i int, due time.Time)) {
		defer wg.Done()
		if rate <= 0 {
			return
		}
		interval := time.Duration(float64(time.Second) / rate)
		for i := 0; ; i++ {
			due := start.Add(time.Duration(i) * interval)
			if !due.Before(end) || ctx.Err() != nil {
				return
			}
			if w := time.Until(due); w > 0 {
				time.Sleep(w)
			}
			slots <- struct{}{} // waits when maxIn are outstanding; latency keeps counting from due
			if lag := time.Since(due); lag > 0 {
				mu.Lock()
				maxLag = max(maxLag, lag)
				mu.Unlock()
			}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				fire(i, due)
			}()
		}
	}

	path, contentType, okStatus := postTarget(o.Payload)
	post := func(i int, due time.Time) int {
		seed := o.Seed + uint64(i)
		rng := rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1))
		high, low := ids.next()
		if o.RandomIDs {
			low = rng.Uint64() | 1
		}
		ts := due.UnixMicro()
		ts -= o.AgeMicros
		if o.SpreadMicros > 0 {
			ts -= 1 + rng.Int64N(o.SpreadMicros)
		}
		var body []byte
		switch o.Payload {
		case payloadOTLP:
			body = appendOTLPTrace(make([]byte, 0, 4<<10), rng, &realIDs{high: high, low: low, baseMicro: ts})
		case payloadOTelJSON:
			body = appendOTelJSONTrace(make([]byte, 0, 8<<10), rng, &realIDs{high: high, low: low, baseMicro: ts})
		default:
			body = appendTrace(make([]byte, 0, 8<<10), rng, &realIDs{high: high, low: low, baseMicro: ts})
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, o.BaseURL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		status := 0
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
		}
		now := time.Now()
		d := now.Sub(due)
		if err != nil && d > timeout {
			d = timeout
		}
		if status == okStatus {
			status = http.StatusAccepted // counted as accepted below
		}
		mu.Lock()
		if status == http.StatusAccepted {
			acceptedAll++
		}
		if !due.Before(warm) {
			posts = append(posts, sample{d: d, status: status})
		}
		if now.After(lastDone) {
			lastDone = now
		}
		mu.Unlock()
		return status
	}
	// closed runs the closed loop (Closed senders) instead of the schedule.
	closed := func(wg *sync.WaitGroup) {
		defer wg.Done()
		backoff := o.Backoff
		if backoff == 0 {
			backoff = 20 * time.Millisecond
		}
		time.Sleep(time.Until(start))
		var next atomic.Int64
		var senders sync.WaitGroup
		for range o.Closed {
			senders.Go(func() {
				for ctx.Err() == nil {
					now := time.Now()
					if !now.Before(end) {
						return
					}
					if post(int(next.Add(1)-1), now) == http.StatusServiceUnavailable {
						time.Sleep(backoff)
					}
				}
			})
		}
		senders.Wait()
	}
	query := func(i int, due time.Time) {
		kind := queryKinds[i%len(queryKinds)]
		rng := rand.New(rand.NewPCG(o.Seed^uint64(i), 7))
		req, _ := http.NewRequestWithContext(qctx, http.MethodGet, o.BaseURL+queryPath(kind, rng), nil)
		resp, err := client.Do(req)
		ok := false
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			ok = resp.StatusCode == http.StatusOK
		}
		d := time.Since(due)
		mu.Lock()
		if due.Before(warm) {
			mu.Unlock()
			return
		}
		queries[kind] = append(queries[kind], d)
		switch {
		case qctx.Err() != nil && !ok:
			unfinished++
		case !ok:
			queryErr++
		}
		mu.Unlock()
	}

	postWG.Add(1)
	queryWG.Add(1)
	if o.Closed > 0 {
		go closed(&postWG)
	} else {
		go schedule(&postWG, o.Rate, func(i int, due time.Time) { post(i, due) })
	}
	go schedule(&queryWG, o.QueryRate, query)
	postWG.Wait()
	var c1 int64
	if count != nil {
		tc1 = time.Now() // the count's snapshot is taken when it starts
		c1 = count()
	}
	qdone := make(chan struct{})
	go func() { queryWG.Wait(); close(qdone) }()
	select {
	case <-qdone:
	case <-time.After(2 * time.Second):
		qcancel()
		<-qdone
	}
	mu.Lock()
	elapsed := lastDone.Sub(warm)
	mu.Unlock()
	if elapsed <= 0 {
		elapsed = o.Duration - o.WarmUp
	}

	r := StepResult{Offered: o.Rate, Sent: len(posts), AcceptedAll: acceptedAll, QueryErr: queryErr, QueriesUnfinished: unfinished,
		Seconds: o.Duration.Seconds(), MaxLagMs: float64(maxLag.Microseconds()) / 1e3}
	if count != nil {
		r.StoredPerSec = float64(c1) / tc1.Sub(start).Seconds()
	}
	all := make([]time.Duration, 0, len(posts))
	var ok []time.Duration
	for _, s := range posts {
		all = append(all, s.d)
		switch {
		case s.status == http.StatusAccepted:
			r.Accepted++
			ok = append(ok, s.d)
		case s.status == http.StatusServiceUnavailable:
			r.Rejected++
		case s.status == 0:
			r.Errors++
		default:
			r.OtherHTTP++
		}
	}
	r.Completed = float64(r.Accepted+r.Rejected+r.OtherHTTP) / elapsed.Seconds()
	r.Latency = summarize(all)
	for _, d := range ok {
		r.Samples202 = append(r.Samples202, float64(d.Microseconds())/1e3)
	}
	r.Latency202 = summarize(ok)
	if len(queries) > 0 {
		r.Queries = map[string]Latency{}
		for k, v := range queries {
			r.Queries[k] = summarize(v)
		}
	}
	return r
}

func (r StepResult) String() string {
	return fmt.Sprintf("offered %.0f/s: sent %d, 202 %d, 503 %d, other %d, errors %d, p99 %.1f ms",
		r.Offered, r.Sent, r.Accepted, r.Rejected, r.OtherHTTP, r.Errors, r.Latency.P99)
}
