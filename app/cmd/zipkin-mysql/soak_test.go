package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// TestFaultSoak posts 5-span traces from 4 clients, each recording every
// trace answered 202, through a sequence of faults, with the spool on:
// KILL of every database thread, a MariaDB restart, MariaDB stopped
// (SOAK_STOP, 5s by default), SIGTERM and a new server, SIGKILL and a new
// server, and a full disk for the spool (a 2 MiB tmpfs, filled while
// MariaDB is stopped; skipped when the test cannot mount one). Then every
// accepted trace is read back through the API: complete and exactly once.
// SOAK_RUNS repeats the sequence (1 by default; 10 by hand with
// SOAK_STOP=60s for the long version).
func TestFaultSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("fault soak")
	}
	runs, stopFor := 1, 5*time.Second
	if v := os.Getenv("SOAK_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SOAK_RUNS=%q", v)
		}
		runs = n
	}
	if v := os.Getenv("SOAK_STOP"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("SOAK_STOP=%q", v)
		}
		stopFor = d
	}
	m := mysqltest.StartMariaDB(t)
	admin := openDB(t, m.DSN())
	spoolDir := t.TempDir()
	fullDisk := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", spoolDir).Run() == nil
	if fullDisk {
		t.Cleanup(func() { _ = exec.Command("umount", spoolDir).Run() })
	} else {
		t.Log("cannot mount a tmpfs: the full-disk fault is skipped")
	}
	args := []string{"-listen", "127.0.0.1:0", "-dsn", m.DSN(), "-init-schema", "-writers", "2", "-spool-dir", spoolDir, "-drain-timeout", "5s"}
	env := []string{"MYSQL_MAX_CONNECTIONS=4"}
	srv := startBinary(t, env, args...)
	var base atomic.Pointer[string]
	base.Store(&srv.url)

	var seq atomic.Int64
	var mu sync.Mutex
	accepted := map[string]bool{}
	var rejected, spoolFull, transport atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 10 * time.Second}
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				i := int(seq.Add(1))
				tid, body := soakTrace(i)
				resp, err := client.Post(*base.Load()+"/api/v2/spans", "application/json", strings.NewReader(body))
				if err != nil {
					transport.Add(1)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusAccepted:
					mu.Lock()
					accepted[tid] = true
					mu.Unlock()
				case http.StatusServiceUnavailable:
					rejected.Add(1)
					if strings.Contains(string(b), "spool") {
						spoolFull.Add(1)
					}
				default:
					t.Errorf("POST: HTTP %d %s", resp.StatusCode, b)
				}
			}
		}()
	}
	nAccepted := func() int { mu.Lock(); defer mu.Unlock(); return len(accepted) }
	progress := func(what string) {
		t.Helper()
		n := nAccepted()
		waitFor(t, 2*time.Minute, "traces accepted after "+what, func() bool { return nAccepted() >= n+50 })
	}
	restart := func(sig syscall.Signal) {
		t.Helper()
		if sig == syscall.SIGTERM {
			srv.stop(t)
		} else {
			_ = srv.cmd.Process.Signal(sig)
			<-srv.exited
		}
		srv = startBinary(t, env, args...)
		base.Store(&srv.url)
	}
	progress("start")
	faults := map[string]int{}
	for run := 0; run < runs; run++ {
		t0 := time.Now()
		// KILL every thread but our own.
		rows, err := admin.Query("SELECT id FROM information_schema.processlist WHERE id <> CONNECTION_ID() AND command NOT IN ('Daemon', 'Binlog Dump')")
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			_ = rows.Scan(&id)
			ids = append(ids, id)
		}
		rows.Close()
		for _, id := range ids {
			_, _ = admin.Exec(fmt.Sprintf("KILL %d", id))
		}
		faults["kill-threads"]++
		progress("KILL")
		m.Restart(t)
		faults["mariadb-restart"]++
		progress("MariaDB restart")
		m.Stop(t)
		time.Sleep(stopFor)
		m.Start(t)
		faults["mariadb-stopped"]++
		progress("MariaDB stopped")
		restart(syscall.SIGTERM)
		faults["sigterm-restart"]++
		progress("SIGTERM")
		restart(syscall.SIGKILL)
		faults["sigkill-restart"]++
		progress("SIGKILL")
		if fullDisk {
			before := spoolFull.Load()
			m.Stop(t)
			waitFor(t, 2*time.Minute, "the spool's disk to fill", func() bool { return spoolFull.Load() > before+10 })
			m.Start(t)
			faults["spool-full-disk"]++
			progress("full disk")
		}
		t.Logf("run %d: %v", run, time.Since(t0).Round(time.Second))
	}
	close(stop)
	wg.Wait()
	waitDrained(t, srv.url, 3*time.Minute)
	waitFor(t, time.Minute, "the spool to be empty", func() bool { return metric(t, srv.url, `zipkin_spool_records{transport="http"}`) == 0 })

	// Read every accepted trace back through the API.
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	incomplete, seen := 0, map[string]int{}
	for i := 0; i < len(ids); i += 100 {
		chunk := ids[i:min(i+100, len(ids))]
		q := strings.Join(chunk, ",")
		if len(chunk) == 1 {
			q += ",1"
		}
		code, b := httpGet(t, srv.url+"/api/v2/traceMany?traceIds="+q)
		if code != http.StatusOK {
			t.Fatalf("traceMany: HTTP %d %s", code, b)
		}
		var traces [][]struct {
			TraceID string `json:"traceId"`
			ID      string `json:"id"`
		}
		if err := json.Unmarshal(b, &traces); err != nil {
			t.Fatal(err)
		}
		for _, tr := range traces {
			spanIDs := map[string]int{}
			for _, sp := range tr {
				spanIDs[sp.ID]++
			}
			if len(tr) > 0 {
				seen[tr[0].TraceID]++
			}
			if len(tr) != 5 || len(spanIDs) != 5 {
				incomplete++
			}
		}
	}
	missing, twice := 0, 0
	for _, id := range ids {
		switch seen[id] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	spans := countRows(t, admin, "SELECT COUNT(*) FROM zipkin_spans")
	distinct := countRows(t, admin, "SELECT COUNT(DISTINCT trace_id, id) FROM zipkin_spans")
	t.Logf("faults %v: %d traces answered 202 (%d spans), %d POSTs answered 503 (%d for the full spool), %d transport errors; "+
		"read back: %d missing, %d incomplete, %d twice; MariaDB %d spans (%d distinct)",
		faults, len(ids), 5*len(ids), rejected.Load(), spoolFull.Load(), transport.Load(), missing, incomplete, twice, spans, distinct)
	if missing > 0 || incomplete > 0 || twice > 0 || spans != distinct {
		t.Errorf("accepted traces: %d missing, %d incomplete, %d returned twice; %d span rows, %d distinct", missing, incomplete, twice, spans, distinct)
	}
	srv.stop(t)
}

// soakTrace is trace number i: 5 spans (a root and 4 children) of one
// trace ID, unique per i.
func soakTrace(i int) (traceID, body string) {
	tid := fmt.Sprintf("%016x", uint64(0x5a)<<56|uint64(i))
	now := time.Now().UnixMicro()
	var b strings.Builder
	b.WriteByte('[')
	for k := 1; k <= 5; k++ {
		if k > 1 {
			b.WriteByte(',')
		}
		parent := ""
		if k > 1 {
			parent = `"parentId":"0000000000000001",`
		}
		fmt.Fprintf(&b, `{"traceId":%q,%s"id":"%016x","name":"op%d","kind":"SERVER","timestamp":%d,"duration":150,`+
			`"localEndpoint":{"serviceName":"soak"},"tags":{"k":"v"}}`, tid, parent, k, k, now+int64(k))
	}
	b.WriteByte(']')
	return tid, b.String()
}
