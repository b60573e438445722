package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/internal/mysqltest"
)

// With MYSQL_HOST listing two hosts the command runs on the cluster
// connector: /health lists each host (the dead one DOWN with its error, the
// live one UP), /metrics has sqlpool_host_up per host, and spans are stored
// and read back through the live host.
func TestSeveralHostsHealthAndMetrics(t *testing.T) {
	dsn := mysqltest.EmbeddedDSN(t)
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, dsn)
	name := "zh_" + randHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP DATABASE "+name) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now: dials are refused

	base, stop := runInProcess(t, envFunc("MYSQL_HOST", dead+","+mc.Addr, "MYSQL_USER", mc.User, "MYSQL_PASS", mc.Passwd,
		"MYSQL_DB", name, "MYSQL_MAX_CONNECTIONS", "2"), "-init-schema", "-storage", "mysql")
	defer stop()

	var doc struct {
		Status string `json:"status"`
		Zipkin struct {
			Details map[string]struct {
				Status  string `json:"status"`
				Details struct {
					Hosts []struct {
						Host, Status, Error string
					} `json:"hosts"`
					HostsUp  int    `json:"hostsUp"`
					Strategy string `json:"strategy"`
				} `json:"details"`
			} `json:"details"`
		} `json:"zipkin"`
	}
	code, body := httpGet(t, base+"/health")
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("/health %d: %v: %s", code, err, body)
	}
	if code != 200 || doc.Status != "UP" || len(doc.Zipkin.Details) != 1 {
		t.Fatalf("/health %d: %s", code, body)
	}
	for storage, c := range doc.Zipkin.Details {
		if !strings.Contains(storage, dead+","+mc.Addr) {
			t.Errorf("/health names the storage %q, want both hosts in it", storage)
		}
		d := c.Details
		if len(d.Hosts) != 2 || d.HostsUp != 1 || d.Strategy != "sequential" {
			t.Fatalf("/health details: %s", body)
		}
		if h := d.Hosts[0]; h.Host != dead || h.Status != "DOWN" || !strings.Contains(h.Error, "refused") {
			t.Errorf("/health dead host: %+v", h)
		}
		if h := d.Hosts[1]; h.Host != mc.Addr || h.Status != "UP" || h.Error != "" {
			t.Errorf("/health live host: %+v", h)
		}
	}
	if v := metric(t, base, `sqlpool_host_up{host="`+dead+`",pool="zipkin"}`); v != 0 {
		t.Errorf("sqlpool_host_up of the dead host = %v, want 0", v)
	}
	if v := metric(t, base, `sqlpool_host_up{host="`+mc.Addr+`",pool="zipkin"}`); v != 1 {
		t.Errorf("sqlpool_host_up of the live host = %v, want 1", v)
	}
	_, info := httpGet(t, base+"/info")
	if !strings.Contains(string(info), `"hostStrategy":"sequential (MYSQL_HOST)"`) || strings.Contains(string(info), mc.Passwd+"@") {
		t.Errorf("/info: %s", info)
	}
}

// -backfill-dependencies counts spans stored with the aggregator off, and
// refuses to run when the aggregator is off.
func TestBackfillDependenciesFlag(t *testing.T) {
	env := envFunc("MYSQL_AGGREGATE_DEPENDENCIES", "false")
	cfg, err := parseConfig([]string{"-storage", "embedded", "-backfill-dependencies"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.BackfillDependencies || cfg.AggregateDependencies {
		t.Fatalf("config: %+v", cfg)
	}
	_, err = openStorage(t.Context(), cfg, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), nil)
	if err == nil || !strings.Contains(err.Error(), "needs the dependency aggregator") {
		t.Fatalf("-backfill-dependencies with MYSQL_AGGREGATE_DEPENDENCIES=false: %v", err)
	}
	cfg, err = parseConfig([]string{"-storage", "embedded", "-backfill-dependencies"}, envFunc(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	st, err := openStorage(t.Context(), cfg, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	st.close()
}
