package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	zmodel "github.com/openzipkin/zipkin-go/model"
	"github.com/openzipkin/zipkin-go/reporter"
	zamqp "github.com/openzipkin/zipkin-go/reporter/amqp"
	zkafka "github.com/openzipkin/zipkin-go/reporter/kafka"
	amqp "github.com/rabbitmq/amqp091-go"
	metrics "github.com/rcrowley/go-metrics"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sqlpool/sqlpool/app/internal/rabbittest"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// TestLongSlowStore is the long back-pressure run, by hand only
// (ZIPKIN_LONG=kafka or rabbitmq, on MariaDB: MYSQL_TEST_DSN): the span
// server writes through a proxy that adds 50 ms to every chunk each way
// (ZIPKIN_LONG_LATENCY) for 60 s (ZIPKIN_LONG_SECONDS) while zipkin-go's
// reporter sends ZIPKIN_LONG_RATE spans a second (5,000 by default); it
// logs, every 5 s, the server's RSS, its queue depth, the spans stored and
// the backlog in the broker, then lifts the latency and waits for the
// backlog to drain. ZIPKIN_LONG_PPROF=127.0.0.1:PORT passes -pprof.
func TestLongSlowStore(t *testing.T) {
	transport := os.Getenv("ZIPKIN_LONG")
	if transport == "" {
		t.Skip("by hand: ZIPKIN_LONG=kafka or ZIPKIN_LONG=rabbitmq, with MYSQL_TEST_DSN")
	}
	envInt := func(name string, def int) int {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s=%q: %v", name, v, err)
			}
			return n
		}
		return def
	}
	rate, seconds := envInt("ZIPKIN_LONG_RATE", 5000), envInt("ZIPKIN_LONG_SECONDS", 60)
	latency := time.Duration(envInt("ZIPKIN_LONG_LATENCY", 50)) * time.Millisecond
	dsn := freshDatabase(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := mysqltest.NewProxy(t, cfg.Addr)

	var env []string
	var rep reporter.Reporter
	var backlog func() int64
	switch transport {
	case "kafka":
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "zipkin"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		metrics.UseNilMetrics = true
		if rep, err = zkafka.NewReporter(c.ListenAddrs()); err != nil {
			t.Fatal(err)
		}
		env = []string{"KAFKA_BOOTSTRAP_SERVERS=" + strings.Join(c.ListenAddrs(), ",")}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		backlog = func() int64 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			lags, err := adm.Lag(ctx, "zipkin")
			if err != nil {
				return -1
			}
			return lags["zipkin"].Lag.Total()
		}
	case "rabbitmq":
		b := rabbittest.Start(t)
		if rep, err = zamqp.NewReporter(b.URL); err != nil {
			t.Fatal(err)
		}
		env = []string{"RABBIT_URI=" + b.URL}
		conn, err := amqp.Dial(b.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		backlog = func() int64 {
			q, err := ch.QueueDeclarePassive("zipkin", true, false, false, false, nil)
			if err != nil {
				return -1
			}
			return int64(q.Messages)
		}
	default:
		t.Fatalf("ZIPKIN_LONG=%q: use kafka or rabbitmq", transport)
	}
	args := []string{"-listen", "127.0.0.1:0", "-dsn", proxy.DSN(dsn), "-init-schema"}
	if pp := os.Getenv("ZIPKIN_LONG_PPROF"); pp != "" {
		args = append(args, "-pprof", pp) // e.g. 127.0.0.1:6061, for a heap profile during the run
	}
	p := startBinary(t, env, args...)
	rss := func() string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				return strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:"))
			}
		}
		return "?"
	}
	stored := func() float64 { return metric(t, p.url, `zipkin_collector_spans_stored_total{transport="http"}`) }
	report := func(phase string, t0 time.Time) {
		qs := metric(t, p.url, queueSpans)
		t.Logf("%-8s t=%3.0fs rss=%s queue=%v stored=%v backlog=%d", phase, time.Since(t0).Seconds(), rss(), qs, stored(), backlog())
	}

	proxy.SetLatency(latency)
	service := transport + "-long-" + randHex(4)
	run := uint64(time.Now().UnixNano()) | 1
	t0 := time.Now()
	tick := time.NewTicker(time.Second / time.Duration(max(1, rate/100)))
	defer tick.Stop()
	next := time.Now().Add(5 * time.Second)
	sent := 0
	for time.Since(t0) < time.Duration(seconds)*time.Second {
		<-tick.C
		for range 100 {
			rep.Send(zmodel.SpanModel{
				SpanContext:   zmodel.SpanContext{TraceID: zmodel.TraceID{High: run, Low: uint64(sent) + 1}, ID: zmodel.ID(uint64(sent) + 1)},
				Name:          "op",
				Timestamp:     time.Now(),
				Duration:      time.Millisecond,
				LocalEndpoint: &zmodel.Endpoint{ServiceName: service},
			})
			sent++
		}
		if time.Now().After(next) {
			report("slow", t0)
			next = next.Add(5 * time.Second)
		}
	}
	slowStored := stored()
	t.Logf("sent %d spans in %v (%.0f/s); the store took %.0f/s with %v latency", sent, time.Since(t0).Round(time.Second),
		float64(sent)/time.Since(t0).Seconds(), slowStored/time.Since(t0).Seconds(), latency)
	if err := rep.Close(); err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(0)
	t1 := time.Now()
	for backlog() != 0 || metric(t, p.url, queueSpans) != 0 {
		time.Sleep(5 * time.Second)
		report("drain", t1)
		if time.Since(t1) > 10*time.Minute {
			t.Fatal("backlog not drained after 10 min")
		}
	}
	db := openDB(t, dsn)
	n := countRows(t, db, "SELECT COUNT(*) FROM zipkin_spans")
	t.Logf("drained in %v; %d span rows stored of %d sent; final rss=%s", time.Since(t1).Round(time.Second), n, sent, rss())
	if n != int64(sent) {
		t.Errorf("%d spans stored, want %d", n, sent)
	}
	p.stop(t)
}
