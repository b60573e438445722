package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
	"github.com/sqlpool/sqlpool/internal/testutil"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	if code == 0 {
		// Keep-alive connections of the tests' HTTP clients.
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		// zipkin-go's AMQP reporter (brokers_test.go) never ends its
		// error-logging goroutine: Close does not close its channel.
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/openzipkin/zipkin-go/reporter/amqp.(*rmqReporter).logErrors")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// buildBinary builds the command once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "zipkin-mysql-bin")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "zipkin-mysql")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// proc is the command running as a child process.
type proc struct {
	cmd    *exec.Cmd
	url    string
	stdout *syncBuffer
	stderr *syncBuffer
	exited chan struct{}
	err    error
}

// syncBuffer collects a child process's output safely.
type syncBuffer = testutil.Buffer

var listenRE = regexp.MustCompile(`listening on (http://[0-9.:]+)`)

// startBinary runs the built command with args and env (added to a clean
// environment) and waits until it prints where it listens. The process is
// killed at the end of the test if it is still running.
func startBinary(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	bin := buildBinary(t)
	p := &proc{stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
	deadline := time.After(60 * time.Second)
	for {
		if m := listenRE.FindStringSubmatch(p.stdout.String()); m != nil {
			p.url = m[1]
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("zipkin-mysql exited (%v) before listening:\nstdout: %s\nstderr: %s", p.err, p.stdout, p.stderr)
		case <-deadline:
			t.Fatalf("zipkin-mysql did not listen within 60 s:\nstdout: %s\nstderr: %s", p.stdout, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscallSIGTERM)
	select {
	case <-p.exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("zipkin-mysql did not exit within 90 s of SIGTERM:\n%s", p.stderr)
	}
	if p.err != nil {
		t.Fatalf("zipkin-mysql exited with %v:\n%s", p.err, p.stderr)
	}
}

// metric reads one sample from a /metrics page.
func metric(t testing.TB, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(line[len(name):]), 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("metric %s not on %s/metrics", name, base)
	return 0
}

const queueSpans = `zipkin_collector_queue_spans{transport="http"}`

// waitFor is testutil.Eventually: it polls cond until it holds, failing the
// test after d.
var waitFor = testutil.Eventually

func waitDrained(t testing.TB, base string, d time.Duration) {
	t.Helper()
	waitFor(t, d, "the ingest queue to drain", func() bool { return metric(t, base, queueSpans) == 0 })
}

func httpGet(t testing.TB, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// freshDatabase creates a database of its own on the MariaDB of
// MYSQL_TEST_DSN (dropped at the end of the test) and returns a DSN for it.
// It skips (or fails under SQLPOOL_REQUIRE_MARIADB=1) without MariaDB.
func freshDatabase(t *testing.T) string {
	t.Helper()
	mysqltest.RequireMariaDB(t, "end-to-end on MariaDB")
	base := mysqltest.DSN(t)
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		t.Fatal(err)
	}
	var rb [4]byte
	_, _ = rand.Read(rb[:])
	name := "zs_" + hex.EncodeToString(rb[:])
	db := openDB(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = db.ExecContext(ctx, "DROP DATABASE "+name)
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func countRows(t testing.TB, db *sql.DB, q string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var n int64
	if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func envFunc(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// runInProcess runs the command in this process on a free port with args
// and env, and returns its base URL once it listens. stop ends it and
// fails the test if run returned an error.
func runInProcess(t *testing.T, env func(string) string, args ...string) (base string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	logs := &syncBuffer{}
	go func() {
		done <- run(ctx, append([]string{"-listen", "127.0.0.1:0"}, args...), env, &syncBuffer{}, logs, ready)
	}()
	select {
	case addr := <-ready:
		base = "http://" + addr
	case err := <-done:
		cancel()
		t.Fatalf("run: %v\n%s", err, logs)
	case <-time.After(60 * time.Second):
		cancel()
		<-done
		t.Fatal("not listening after 60 s")
	}
	return base, func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run returned %v\n%s", err, logs)
		}
	}
}
