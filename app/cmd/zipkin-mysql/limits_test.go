package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// On the embedded server (-storage=embedded) and on the default in-memory
// storage: a dependencies window past year 9999 answers 200 [] as on
// MariaDB (on the embedded server it was a 500, "Incorrect datetime value:
// '10000-01-01'"), and the query parameters Zipkin refuses are 400 with
// Zipkin's messages.
func TestEmbeddedQueryEdges(t *testing.T) {
	t.Run("embedded", func(t *testing.T) { queryEdges(t, "-storage=embedded") })
	t.Run("memory (default)", func(t *testing.T) { queryEdges(t) })
}

func queryEdges(t *testing.T, args ...string) {
	base, stop := runInProcess(t, envFunc(), args...)
	defer stop()
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/api/v2/dependencies?endTs=253402300800000&lookback=86400000", 200, "[]"},
		{"/api/v2/dependencies?endTs=9223372036854775807&lookback=9223372036854775807", 200, "["},
		{"/api/v2/traces?minDuration=0", 400, "minDuration <= 0"},
		{"/api/v2/traces?maxDuration=0", 400, "maxDuration is only valid with minDuration"},
		{"/api/v2/traces?limit=2147483648", 400, `For input string: "2147483648"`},
		{"/api/v2/traces?endTs=253402300800000&lookback=86400000", 200, "[]"},
	} {
		code, b := httpGet(t, base+c.path)
		if code != c.code || !strings.HasPrefix(string(b), c.body) {
			t.Errorf("GET %s: %d %q, want %d %q", c.path, code, b, c.code, c.body)
		}
	}
}

// An idle keep-alive connection is closed after -idle-timeout, and a
// request whose headers are larger than maxHeaderBytes is refused with 431
// instead of being buffered.
func TestIdleAndHeaderLimits(t *testing.T) {
	base, stop := runInProcess(t, envFunc(), "-storage", "none", "-idle-timeout", "300ms")
	defer stop()
	addr := strings.TrimPrefix(base, "http://")

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	if _, err := io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("first request: %d close=%v, want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	t0 := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := br.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection: read %d bytes, %v; want EOF (closed by the server)", n, err)
	}
	if took := time.Since(t0); took < 250*time.Millisecond || took > 5*time.Second {
		t.Fatalf("idle connection closed after %v, want about 300ms", took)
	}

	req, _ := http.NewRequest("GET", base+"/health", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 64<<10))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("64 KiB header: %d, want 431", resp.StatusCode)
	}
	req.Header.Set("X-Big", strings.Repeat("a", 8<<10))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("8 KiB header: %d, want 200", resp.StatusCode)
	}
}
