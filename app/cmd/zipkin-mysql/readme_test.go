package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// readmeCurl returns the JSON body of README's curl command with the shell's
// $(date +%s)000000 filled in.
func readmeCurl(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if !strings.Contains(text, "\ngo run ./app/cmd/zipkin-mysql\n") {
		t.Fatal("README's run block does not have `go run ./app/cmd/zipkin-mysql`")
	}
	i := strings.Index(text, "curl -s -X POST localhost:9411/api/v2/spans")
	if i < 0 {
		t.Fatal("README has no curl POST to localhost:9411/api/v2/spans")
	}
	rest := text[i:]
	j := strings.Index(rest, "-d '")
	if j < 0 {
		t.Fatal("README's curl has no -d '…'")
	}
	line := rest[j+len("-d '"):]
	line = line[:strings.IndexByte(line, '\n')]
	line = strings.TrimSuffix(line, "'")
	return strings.ReplaceAll(line, "'$(date +%s)000000'", strconv.FormatInt(time.Now().Unix(), 10)+"000000")
}

// TestREADMECommand builds the command, starts it as README says (with
// -listen 127.0.0.1:0 instead of :9411: the in-memory storage, whose bound
// and eviction the start-up lines state), posts README's curl body and
// reads the span back from /api/v2/traces; SIGTERM then stops it cleanly.
func TestREADMECommand(t *testing.T) {
	p := startBinary(t, nil, "-listen", "127.0.0.1:0")
	// startBinary returns once the "listening" line is out; the lines after it may still be
	// on their way through the pipe: wait for them (up to 10 s) rather than read at once.
	wants := []string{"curl -s -X POST " + p.url + "/api/v2/spans", "(storage: InMemoryStorage,",
		"in-memory storage: for trying out; it keeps the newest 500000 spans (MEM_MAX_SPANS) and evicts the oldest traces past that"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, missing := p.stdout.String(), ""
		for _, want := range wants {
			if !strings.Contains(out, want) {
				missing = want
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("stdout lacks %q after 10 s:\n%s", missing, out)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	body := readmeCurl(t)
	resp, err := http.Post(p.url+"/api/v2/spans", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST README body: %d", resp.StatusCode)
	}
	waitDrained(t, p.url, 30*time.Second)
	code, got := httpGet(t, p.url+"/api/v2/traces")
	if code != 200 || !strings.Contains(string(got), `"traceId":"5af7183fb1d4cf5f"`) || !strings.Contains(string(got), `"serviceName":"frontend"`) {
		t.Fatalf("/api/v2/traces: %d %s", code, got)
	}
	p.stop(t)
}

// TestStartupFailures: each start-up failure is one line on stderr saying
// what to do, and a non-zero exit; the password never appears.
func TestStartupFailures(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fault test: eight failing start-ups of the binary, several waiting out a connect timeout")
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	noSchema := mysqltest.NewEmbedded(t) // a server without Zipkin's tables
	// A server that accepts and drops every connection: the driver logs the
	// failed read itself unless the command gives it a logger.
	dropping, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer dropping.Close()
	go func() {
		for {
			c, err := dropping.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	droppingAddr := dropping.Addr().String()

	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"port in use", nil, []string{"-listen", busy.Addr().String()}, "cannot listen on " + busy.Addr().String()},
		{"bad DSN", nil, []string{"-listen", "127.0.0.1:0", "-dsn", "zipkin:pw-Secret9@db:3306/zipkin"}, "-dsn is not a go-sql-driver/mysql DSN"},
		{"unreachable", nil, []string{"-listen", "127.0.0.1:0", "-connect-timeout", "1s", "-dsn", "zipkin:pw-Secret9@tcp(" + closedAddr + ")/zipkin"},
			"cannot reach MySQL at " + closedAddr + " within 1s"},
		{"unreachable env", []string{"MYSQL_HOST=127.0.0.1", "MYSQL_TCP_PORT=" + closedAddr[strings.LastIndexByte(closedAddr, ':')+1:], "MYSQL_PASS=pw-Secret9"},
			[]string{"-listen", "127.0.0.1:0", "-connect-timeout", "1s"}, "cannot reach MySQL at " + closedAddr},
		{"connection dropped", nil, []string{"-listen", "127.0.0.1:0", "-connect-timeout", "1s", "-dsn", "zipkin:pw-Secret9@tcp(" + droppingAddr + ")/zipkin"},
			"cannot reach MySQL at " + droppingAddr},
		{"unreachable JDBC URL with credentials", []string{"MYSQL_JDBC_URL=jdbc:mysql://zipkin:pw-Secret9@" + closedAddr + "/zipkin"},
			[]string{"-listen", "127.0.0.1:0", "-connect-timeout", "1s"}, "cannot reach MySQL at " + closedAddr},
		{"missing schema", nil, []string{"-listen", "127.0.0.1:0", "-dsn", noSchema}, "the Zipkin tables are missing"},
		{"bad env", []string{"QUERY_LOOKBACK=soon"}, []string{"-listen", "127.0.0.1:0"}, `QUERY_LOOKBACK="soon" is not a whole number`},
		{"storage type not supported", []string{"STORAGE_TYPE=cassandra3"}, []string{"-listen", "127.0.0.1:0"}, "STORAGE_TYPE=cassandra3 is not supported here: use mem, mysql or postgres"},
	}
	if dsn := os.Getenv("MYSQL_TEST_DSN"); dsn != "" {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Passwd = "pw-Secret9"
		cases = append(cases, struct {
			name string
			env  []string
			args []string
			want string
		}{"wrong password", nil, []string{"-listen", "127.0.0.1:0", "-dsn", cfg.FormatDSN()}, "refused user"})
	}
	bin := buildBinary(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, c.args...)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, c.env...)
			cmd.Stdout = io.Discard
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(stderr)
			err = cmd.Wait()
			if err == nil {
				t.Fatalf("exit 0, want a failure; stderr:\n%s", out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			last := lines[len(lines)-1]
			if len(lines) != 1 || !strings.HasPrefix(last, "zipkin-mysql: ") || !strings.Contains(last, c.want) {
				t.Fatalf("stderr %q, want one line zipkin-mysql: …%s…", out, c.want)
			}
			if strings.Contains(string(out), "pw-Secret9") {
				t.Fatalf("the password is in the output:\n%s", out)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Fatalf("took %v to fail", d)
			}
		})
	}
}
