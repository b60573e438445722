package mysqlstore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/sqlpool/sqlpool/metrics"
)

// GetServiceNames returns the local service names of every stored span,
// sorted (byte order). Names recorded only as a remote endpoint (address
// annotations) are not included. There is no time bound, as in Zipkin's
// MySQL store. With DisableSearch it returns nothing.
func (s *Store) GetServiceNames(ctx context.Context) ([]string, error) {
	if s.opts.DisableSearch {
		return nil, nil
	}
	return s.selectNames(ctx, stmtSelectServiceNames, sqlServiceNames)
}

// GetSpanNames returns the span names recorded by a local service, sorted.
// The service name is lower-cased first, as stored names are; "" returns
// nothing, as does DisableSearch.
func (s *Store) GetSpanNames(ctx context.Context, serviceName string) ([]string, error) {
	serviceName = strings.ToLower(strings.TrimSpace(serviceName))
	if s.opts.DisableSearch || serviceName == "" {
		return nil, nil
	}
	q := sqlSpanNames
	if !s.feat.traceIDHigh {
		q = sqlSpanNamesNoHigh
	}
	return s.selectNames(ctx, stmtSelectSpanNames, q, serviceName)
}

// GetRemoteServiceNames returns the remote service names of the spans of a
// local service, sorted. The service name is lower-cased first; "" returns
// nothing, as do DisableSearch and a schema without
// zipkin_spans.remote_service_name.
func (s *Store) GetRemoteServiceNames(ctx context.Context, serviceName string) ([]string, error) {
	serviceName = strings.ToLower(strings.TrimSpace(serviceName))
	if s.opts.DisableSearch || serviceName == "" || !s.feat.remoteServiceName {
		return nil, nil
	}
	q := sqlRemoteNames
	if !s.feat.traceIDHigh {
		q = sqlRemoteNamesNoHigh
	}
	return s.selectNames(ctx, stmtSelectRemoteNames, q, serviceName)
}

// selectNames runs a query of one string column and returns its distinct
// non-empty values, sorted.
func (s *Store) selectNames(ctx context.Context, stmt, query string, args ...any) ([]string, error) {
	rows, err := s.db.QueryContext(metrics.WithStatementName(ctx, stmt), query, args...)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: %s: %w", stmt, err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name []byte
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("mysqlstore: %s: %w", stmt, err)
		}
		if len(name) > 0 {
			names = append(names, string(name))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysqlstore: %s: %w", stmt, err)
	}
	return sortedUnique(names), nil
}

// sortedUnique sorts names and drops repeats (the collation may call two
// spellings one value; the caller sees each stored spelling once).
func sortedUnique(names []string) []string {
	sort.Strings(names)
	out := names[:0]
	for i, n := range names {
		if i == 0 || n != names[i-1] {
			out = append(out, n)
		}
	}
	return out
}
