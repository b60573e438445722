package main

import (
	"database/sql"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/pool"
	"github.com/sqlpool/sqlpool/replica"
)

// parseReadReplicas reads MYSQL_READ_REPLICAS: host or host:port, comma-separated.
func parseReadReplicas(getenv func(string) string) []string {
	var out []string
	for _, h := range strings.Split(getenv("MYSQL_READ_REPLICAS"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			if _, _, err := net.SplitHostPort(h); err != nil {
				h = net.JoinHostPort(h, "3306")
			}
			out = append(out, h)
		}
	}
	return out
}

// openReadReplicas, with MYSQL_READ_REPLICAS set, puts a replica.Router over the primary's pool
// p and one pool per replica (same user, password, database and parameters as mcfg): it
// returns the router's writer, for ingest, and its reader, for the query API. The router is
// pool-wide: a query waits until the replica it reads has applied every span write the server
// committed before it (up to 1 s, then it reads the primary), so a trace the server stored is
// found by the next query. Its figures are registered in reg (sqlpool_replica_*). Without
// replicas it returns db (the primary's) and no reader.
func openReadReplicas(cfg *config, mcfg *mysql.Config, p *pool.Pool, db *sql.DB, maxConns int, log *slog.Logger,
	reg *prometheus.Registry, closers *[]func()) (writer, reader *sql.DB, err error) {
	if len(cfg.ReadReplicas) == 0 {
		return db, nil, nil
	}
	var reps []replica.Replica
	for _, h := range cfg.ReadReplicas {
		rc := mcfg.Clone()
		rc.Addr = h
		conn, err := mysql.NewConnector(rc)
		if err != nil {
			return nil, nil, fmt.Errorf("MYSQL_READ_REPLICAS: %s: %w", h, err)
		}
		// A replica that is down does not stop the server: the router reads the primary
		// until its polls succeed.
		rp, err := pool.New(conn, pool.Config{Name: "zipkin-replica-" + h, MaxConns: maxConns,
			ConnectTimeout: cfg.ConnectTimeout, AcquireTimeout: cfg.ConnectTimeout, InitializationFailTimeout: -1, Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("MYSQL_READ_REPLICAS: %s: %w", h, err)
		}
		*closers = append(*closers, func() { _ = rp.Close() })
		reps = append(reps, replica.Replica{Name: h, Connector: rp})
	}
	r, err := replica.New(replica.Config{Name: "zipkin", Primary: p, Replicas: reps, Flavor: replica.MariaDB,
		Mode: replica.PoolWide, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	*closers = append(*closers, func() { _ = r.Close() })
	if err := reg.Register(r.Collector()); err != nil {
		return nil, nil, err
	}
	log.Info("zipkin-mysql: the query API reads from replicas", "replicas", strings.Join(cfg.ReadReplicas, ","),
		"mode", replica.PoolWide.String())
	return r.Writer(), r.Reader(), nil
}
