package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/retry"
)

// The probes of Zipkin's schema-feature detection (Zipkin's Has* classes):
// each selects one column of one row; an unknown column (SQLSTATE 42S22)
// means the feature is absent. Identifiers come from constants only.
const (
	probeSpans             = "SELECT trace_id FROM " + tableSpans + " LIMIT 1"
	probeTraceIDHigh       = "SELECT trace_id_high FROM " + tableSpans + " LIMIT 1"
	probeRemoteServiceName = "SELECT remote_service_name FROM " + tableSpans + " LIMIT 1"
	probeIPv6              = "SELECT endpoint_ipv6 FROM " + tableAnnotations + " LIMIT 1"
	probeErrorCount        = "SELECT error_count FROM " + tableDependencies + " LIMIT 1"
	probeDependencies      = "SELECT 1 FROM " + tableDependencies + " LIMIT 1"
	probeAnnotations       = "SELECT trace_id FROM " + tableAnnotations + " LIMIT 1"
	queryMaxPacket         = "SELECT @@max_allowed_packet"
)

// The ALTER TABLE statements that upgrade an older schema, logged (never
// run) when a feature is missing, as Zipkin does.
const (
	alterTraceIDHigh = "ALTER TABLE " + tableSpans + " ADD trace_id_high BIGINT NOT NULL DEFAULT 0 FIRST; " +
		"ALTER TABLE " + tableAnnotations + " ADD trace_id_high BIGINT NOT NULL DEFAULT 0 FIRST; " +
		"then replace the unique keys on (trace_id, id) and (trace_id, span_id, a_key, a_timestamp) " +
		"with keys that start with trace_id_high (see mysqlstore.SchemaDDL)"
	alterRemoteServiceName = "ALTER TABLE " + tableSpans + " ADD remote_service_name VARCHAR(255) AFTER name, " +
		"ADD KEY remote_service_name (remote_service_name)"
	alterIPv6       = "ALTER TABLE " + tableAnnotations + " ADD endpoint_ipv6 BINARY(16) AFTER endpoint_ipv4"
	alterErrorCount = "ALTER TABLE " + tableDependencies + " ADD error_count BIGINT"
)

// ErrNoSchema is returned by Open when the Zipkin tables do not exist.
var ErrNoSchema = errors.New("mysqlstore: Zipkin tables not found: run the server with -init-schema, " +
	"or call mysqlstore.CreateSchema, or apply the DDL of mysqlstore.SchemaDDL (docs/design/zipkin.md)")

type probeResult uint8

const (
	probeOK probeResult = iota
	probeNoColumn
	probeNoTable
)

// isNoColumn reports an unknown-column error: SQLSTATE 42S22 / 1054 on
// MySQL and MariaDB; go-mysql-server answers 1105 (HY000) "column … could
// not be found".
func isNoColumn(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	return me.Number == 1054 || string(me.SQLState[:]) == "42S22" ||
		me.Number == 1105 && strings.Contains(me.Message, "could not be found")
}

// isNoTable reports an unknown-table error: SQLSTATE 42S02 / 1146 (also
// go-mysql-server's 1146 with SQLSTATE HY000).
func isNoTable(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	return me.Number == 1146 || string(me.SQLState[:]) == "42S02" ||
		me.Number == 1105 && strings.Contains(me.Message, "table not found")
}

// probe runs one probe query, retrying transient (connection) errors, and
// classifies the outcome. Errors that are neither "no column" nor "no
// table" are returned.
func (s *Store) probe(ctx context.Context, q string) (probeResult, error) {
	err := retry.Do(ctx, s.opts.Retry, func(ctx context.Context) error {
		return s.runProbe(ctx, q)
	})
	switch {
	case err == nil:
		return probeOK, nil
	case isNoColumn(err):
		return probeNoColumn, nil
	case isNoTable(err):
		return probeNoTable, nil
	}
	return probeOK, err
}

// runProbe runs query q and reads its rows to the end.
func (s *Store) runProbe(ctx context.Context, q string) error {
	rows, err := s.db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	return rows.Close()
}

// detect runs Zipkin's schema-feature probes once. A missing zipkin_spans
// or zipkin_annotations table is ErrNoSchema. A missing column turns its
// feature off with a WARN log line naming the ALTER TABLE that adds it. A
// probe that fails for another reason: a transient (connection) error is
// returned, so that a store is never built on a guess made while the
// database was unreachable; any other error (a missing privilege, say)
// turns the feature off with a WARN, as Zipkin does.
func (s *Store) detect(ctx context.Context) error {
	log := s.log
	for _, q := range []string{probeSpans, probeAnnotations} {
		r, err := s.probe(ctx, q)
		if err != nil {
			return fmt.Errorf("mysqlstore: probing the Zipkin schema: %w", err)
		}
		if r != probeOK {
			return ErrNoSchema
		}
	}
	feature := func(name, q, alter string) (bool, error) {
		r, err := s.probe(ctx, q)
		switch {
		case err != nil && retry.Classify(err) == retry.Transient:
			return false, fmt.Errorf("mysqlstore: probing the Zipkin schema for %s: %w", name, err)
		case err != nil:
			log.WarnContext(ctx, "mysqlstore: cannot probe schema feature; treating it as absent",
				"feature", name, "query", q, "err", err)
			return false, nil
		case r == probeOK:
			return true, nil
		case r == probeNoTable && alter == alterErrorCount:
			return false, nil // no zipkin_dependencies: logged once below
		}
		log.WarnContext(ctx, "mysqlstore: the Zipkin schema lacks a column; run the ALTER to enable the feature",
			"feature", name, "alter", alter)
		return false, nil
	}
	var err error
	if s.feat.traceIDHigh, err = feature("trace_id_high (128-bit trace IDs)", probeTraceIDHigh, alterTraceIDHigh); err != nil {
		return err
	}
	if s.feat.remoteServiceName, err = feature("remote_service_name", probeRemoteServiceName, alterRemoteServiceName); err != nil {
		return err
	}
	if s.feat.ipv6, err = feature("endpoint_ipv6", probeIPv6, alterIPv6); err != nil {
		return err
	}
	r, perr := s.probe(ctx, probeDependencies)
	switch {
	case perr != nil && retry.Classify(perr) == retry.Transient:
		return fmt.Errorf("mysqlstore: probing the Zipkin schema for zipkin_dependencies: %w", perr)
	case perr != nil:
		log.WarnContext(ctx, "mysqlstore: cannot probe zipkin_dependencies; dependencies are linked from spans",
			"err", perr)
	case r == probeNoTable:
		log.WarnContext(ctx, "mysqlstore: table zipkin_dependencies is missing; dependencies are linked from spans",
			"create", ddlDependencies)
	default:
		s.feat.dependencies = true
		if s.feat.errorCount, err = feature("error_count", probeErrorCount, alterErrorCount); err != nil {
			return err
		}
	}
	return s.readMaxPacket(ctx)
}

// readMaxPacket reads max_allowed_packet once; batches are sized below it.
func (s *Store) readMaxPacket(ctx context.Context) error {
	var v int64
	err := retry.Do(ctx, s.opts.Retry, func(ctx context.Context) error {
		return s.db.QueryRowContext(ctx, queryMaxPacket).Scan(&v)
	})
	if err != nil {
		if retry.Classify(err) == retry.Transient {
			return fmt.Errorf("mysqlstore: reading max_allowed_packet: %w", err)
		}
		s.log.WarnContext(ctx, "mysqlstore: cannot read max_allowed_packet; assuming MySQL's old default of 4 MiB",
			"err", err)
		v = 4 << 20
	}
	s.maxPacket = v
	return nil
}
