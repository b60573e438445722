package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	zmodel "github.com/openzipkin/zipkin-go/model"
	"github.com/openzipkin/zipkin-go/reporter"
	zamqp "github.com/openzipkin/zipkin-go/reporter/amqp"
	zkafka "github.com/openzipkin/zipkin-go/reporter/kafka"
	metrics "github.com/rcrowley/go-metrics"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sqlpool/sqlpool/app/internal/rabbittest"
	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

func TestParseBrokers(t *testing.T) {
	c, err := parseConfig(nil, envFunc(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Brokers.Kafka != nil || c.Brokers.Rabbit != nil {
		t.Fatalf("collectors on without their variables: %+v", c.Brokers)
	}
	c, err = parseConfig(nil, envFunc("KAFKA_BOOTSTRAP_SERVERS", "k1:9092, k2:9092", "KAFKA_TOPIC", "a,b", "KAFKA_GROUP_ID", "g",
		"KAFKA_STREAMS", "3", "RABBIT_ADDRESSES", "r1,r2:5673", "RABBIT_QUEUE", "q", "RABBIT_USER", "u", "RABBIT_PASSWORD", "p",
		"RABBIT_VIRTUAL_HOST", "v", "RABBIT_USE_SSL", "true", "RABBIT_CONCURRENCY", "2", "RABBIT_CONNECTION_TIMEOUT", "1500"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	k, r := c.Brokers.Kafka, c.Brokers.Rabbit
	if k == nil || strings.Join(k.Brokers, "|") != "k1:9092|k2:9092" || strings.Join(k.Topics, "|") != "a|b" || k.GroupID != "g" || k.Streams != 3 {
		t.Fatalf("kafka: %+v", k)
	}
	if r == nil || strings.Join(r.Addresses, "|") != "r1|r2:5673" || r.Queue != "q" || r.User != "u" || r.Password != "p" ||
		r.VirtualHost != "v" || !r.UseTLS || r.Concurrency != 2 || r.ConnectionTimeout != 1500*time.Millisecond {
		t.Fatalf("rabbitmq: %+v", r)
	}
	if c.Brokers.rabbitSecret() != "p" {
		t.Errorf("secret %q", c.Brokers.rabbitSecret())
	}
	c, err = parseConfig(nil, envFunc("KAFKA_BOOTSTRAP_SERVERS", "k:9092", "COLLECTOR_KAFKA_ENABLED", "false",
		"RABBIT_URI", "amqp://u:s3cret@h/v", "COLLECTOR_RABBITMQ_ENABLED", "false"), io.Discard)
	if err != nil || c.Brokers.Kafka != nil || c.Brokers.Rabbit != nil {
		t.Fatalf("COLLECTOR_*_ENABLED=false: %+v %v", c.Brokers, err)
	}
	c, _ = parseConfig(nil, envFunc("RABBIT_URI", "amqp://u:s3cret@h/v"), io.Discard)
	if c.Brokers.Rabbit == nil || c.Brokers.Rabbit.Concurrency != 1 || c.Brokers.rabbitSecret() != "s3cret" {
		t.Fatalf("RABBIT_URI: %+v", c.Brokers.Rabbit)
	}
	for _, env := range [][]string{{"KAFKA_BOOTSTRAP_SERVERS", "k", "KAFKA_STREAMS", "0"}, {"RABBIT_ADDRESSES", "h", "RABBIT_CONCURRENCY", "x"},
		{"RABBIT_ADDRESSES", "h", "RABBIT_CONNECTION_TIMEOUT", "-1"}, {"COLLECTOR_KAFKA_ENABLED", "maybe"}} {
		if _, err := parseConfig(nil, envFunc(env...), io.Discard); err == nil {
			t.Errorf("%v: no error", env)
		}
	}
}

// TestKafkaSIGKILLAndStoreRestart: spans reported by zipkin-go's Kafka
// reporter while the store's connections are cut and refused for 2 s (a
// restart, as the server sees one) and while the server is SIGKILLed and
// started again: every span is readable through the API, once. A group
// member killed this way holds its partitions until Kafka's session
// timeout (45 s) ends.
func TestKafkaSIGKILLAndStoreRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a Kafka session timeout (45 s)")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "zipkin"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	metrics.UseNilMetrics = true // sarama's meters would start a goroutine that never ends
	rep, err := zkafka.NewReporter(c.ListenAddrs())
	if err != nil {
		t.Fatal(err)
	}
	brokerE2E(t, "kafka", []string{"KAFKA_BOOTSTRAP_SERVERS=" + strings.Join(c.ListenAddrs(), ",")}, rep)
}

// TestRabbitMQSIGKILLAndStoreRestart is the same with zipkin-go's AMQP
// reporter and a private rabbitmq-server: the broker delivers the
// unacknowledged messages of the killed server again at once.
func TestRabbitMQSIGKILLAndStoreRestart(t *testing.T) {
	b := rabbittest.Start(t)
	rep, err := zamqp.NewReporter(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	brokerE2E(t, "rabbitmq", []string{"RABBIT_URI=" + b.URL, "RABBIT_CONCURRENCY=2"}, rep)
}

// brokerE2E runs the span server as a child process with env, sends spans
// through rep while the store "restarts" (its connections cut and refused
// for 2 s through a proxy) and the server is SIGKILLed and started again,
// and checks that every span is readable once. ZIPKIN_E2E_RESTART, when
// set, is a shell command run instead of the proxy outage (a real database
// restart, by hand). The store is MariaDB
// (MYSQL_TEST_DSN, a fresh database) or else the embedded MySQL-protocol
// server in a process of its own, so that it outlives the span server.
func brokerE2E(t *testing.T, transport string, env []string, rep reporter.Reporter) {
	// The embedded server slows down fast as its tables grow: a few
	// hundred spans there, thousands on MariaDB; ZIPKIN_E2E_SPANS sets the
	// number (the long run by hand).
	n := 3_000
	if os.Getenv("MYSQL_TEST_DSN") == "" {
		n = 300
	}
	if v := os.Getenv("ZIPKIN_E2E_SPANS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil {
			t.Fatalf("ZIPKIN_E2E_SPANS=%q: %v", v, err)
		}
	}
	dsn := os.Getenv("MYSQL_TEST_DSN")
	if dsn == "" {
		dsn = mysqltest.NewEmbedded(t)
	} else {
		dsn = freshDatabase(t)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := mysqltest.NewProxy(t, cfg.Addr)
	args := []string{"-listen", "127.0.0.1:0", "-dsn", proxy.DSN(dsn), "-init-schema"}
	if os.Getenv("MYSQL_TEST_DSN") == "" {
		env = append(env, "MYSQL_MAX_CONNECTIONS=1") // the embedded server loses writes under concurrent reads
		args = append(args, "-writers", "1")
	}
	p := startBinary(t, env, args...)
	received := `zipkin_collector_messages_total{transport="` + transport + `"}`

	service := transport + "-e2e-" + randHex(4)
	run := rand.Uint64() | 1
	t0 := time.Now()
	for i := range n {
		rep.Send(zmodel.SpanModel{
			SpanContext:   zmodel.SpanContext{TraceID: zmodel.TraceID{High: run, Low: uint64(i) + 1}, ID: zmodel.ID(uint64(i) + 1)},
			Name:          "op",
			Kind:          zmodel.Server,
			Timestamp:     time.Now().Add(-time.Minute),
			Duration:      time.Millisecond,
			LocalEndpoint: &zmodel.Endpoint{ServiceName: service},
		})
		switch i {
		case n / 4:
			waitFor(t, time.Minute, "a quarter of the spans to arrive", func() bool { return metric(t, p.url, received) >= float64(n/8) })
			if cmd := os.Getenv("ZIPKIN_E2E_RESTART"); cmd != "" {
				// By hand: a real restart of the database, e.g.
				// ZIPKIN_E2E_RESTART='systemctl restart mariadb'.
				if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
					t.Fatalf("ZIPKIN_E2E_RESTART: %v\n%s", err, out)
				}
			} else {
				proxy.Refuse(true) // the store "restarts"
				proxy.ResetAll()
				time.Sleep(2 * time.Second)
				proxy.Refuse(false)
			}
		case n / 2:
			waitFor(t, time.Minute, "half of the spans to arrive", func() bool { return metric(t, p.url, received) >= float64(n/3) })
			_ = p.cmd.Process.Kill()
			<-p.exited
			p = startBinary(t, env, args...)
		}
	}
	if err := rep.Close(); err != nil {
		t.Fatal(err)
	}
	if n > 5_000 {
		// Too many for one /traces answer: count the rows, and read a
		// sample of the traces through the API.
		db := openDB(t, dsn)
		q := fmt.Sprintf("SELECT COUNT(*) FROM zipkin_spans WHERE trace_id_high = %d", int64(run))
		waitFor(t, 10*time.Minute, "every span to be stored", func() bool {
			time.Sleep(time.Second)
			return countRows(t, db, q) >= int64(n)
		})
		for range 200 {
			i := rand.IntN(n)
			code, b := httpGet(t, fmt.Sprintf("%s/api/v2/trace/%016x%016x", p.url, run, uint64(i)+1))
			var spans []json.RawMessage
			if code != 200 || json.Unmarshal(b, &spans) != nil || len(spans) != 1 {
				t.Fatalf("trace %d: HTTP %d, %s", i, code, b)
			}
		}
		t.Logf("%s: %d spans stored (rows: %d), a sample of 200 read once each, %v after the first was sent",
			transport, n, countRows(t, db, q), time.Since(t0).Round(time.Second))
		checkCollectorHealth(t, p.url, transport)
		p.stop(t)
		return
	}
	var got map[string]int
	defer func() {
		if t.Failed() {
			t.Logf("%d spans readable; server log:\n%s", len(got), tail(p.stderr.String(), 4000))
		}
	}()
	waitFor(t, 4*time.Minute, "every span to be readable", func() bool {
		time.Sleep(500 * time.Millisecond)
		q := url.Values{"serviceName": {service}, "limit": {fmt.Sprint(2 * n)}, "lookback": {"3600000"}}
		code, b := httpGet(t, p.url+"/api/v2/traces?"+q.Encode())
		if code != 200 {
			return false
		}
		var traces [][]struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &traces); err != nil {
			t.Fatal(err)
		}
		got = map[string]int{}
		for _, tr := range traces {
			for _, sp := range tr {
				got[sp.ID]++
			}
		}
		return len(got) >= n
	})
	for id, k := range got {
		if k != 1 {
			t.Errorf("span %s read %d times", id, k)
		}
	}
	if len(got) != n {
		t.Errorf("%d spans readable, want %d", len(got), n)
	}
	t.Logf("%s: %d spans, all readable once, %v after the first was sent", transport, n, time.Since(t0).Round(time.Second))
	checkCollectorHealth(t, p.url, transport)
	p.stop(t)
}

// checkCollectorHealth checks that /health lists the transport's collector
// (Zipkin's component names) as UP.
func checkCollectorHealth(t *testing.T, base, transport string) {
	t.Helper()
	name := map[string]string{"kafka": "KafkaCollector", "rabbitmq": "RabbitMQCollector"}[transport]
	code, b := httpGet(t, base+"/health")
	var doc struct {
		Zipkin struct {
			Details map[string]struct {
				Status string `json:"status"`
			} `json:"details"`
		} `json:"zipkin"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || code != 200 || doc.Zipkin.Details[name].Status != "UP" {
		t.Errorf("/health: HTTP %d, %s; want %s UP (%v)", code, b, name, err)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
