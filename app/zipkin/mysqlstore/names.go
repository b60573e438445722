package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"

	"github.com/sqlpool/sqlpool/stmtname"
)

// GetServiceNames returns the local service names of every stored span,
// sorted (byte order). Names recorded only as a remote endpoint (address
// annotations) are not included. There is no time bound, as in Zipkin's
// MySQL store. With DisableSearch it returns nothing.
func (s *Store) GetServiceNames(ctx context.Context) ([]string, error) {
	if s.opts.DisableSearch {
		return nil, nil
	}
	if names, ok, err := s.fastNames(ctx, stmtSelectServiceNames, nameService, ""); ok {
		return names, err
	}
	return s.selectNames(ctx, stmtSelectServiceNames, sqlServiceNames)
}

// GetSpanNames returns the span names recorded by a local service, sorted.
// The service name is lower-cased first, as stored names are; "" returns
// nothing, as does DisableSearch.
func (s *Store) GetSpanNames(ctx context.Context, serviceName string) ([]string, error) {
	return s.namesOfService(ctx, serviceName, true, stmtSelectSpanNames, nameSpan, sqlSpanNames, sqlSpanNamesNoHigh)
}

// GetRemoteServiceNames returns the remote service names of the spans of a
// local service, sorted. The service name is lower-cased first; "" returns
// nothing, as do DisableSearch and a schema without
// zipkin_spans.remote_service_name.
func (s *Store) GetRemoteServiceNames(ctx context.Context, serviceName string) ([]string, error) {
	return s.namesOfService(ctx, serviceName, s.feat.remoteServiceName, stmtSelectRemoteNames, nameRemote,
		sqlRemoteNames, sqlRemoteNamesNoHigh)
}

// namesOfService is GetSpanNames and GetRemoteServiceNames: the names of kind recorded for
// serviceName (lower-cased first, as stored names are), from the schema additions' name table
// when there is one, else with query (queryNoHigh on a schema without trace_id_high). "",
// DisableSearch and !supported return nothing.
func (s *Store) namesOfService(ctx context.Context, serviceName string, supported bool, stmt string, kind int,
	query, queryNoHigh string) ([]string, error) {
	serviceName = strings.ToLower(strings.TrimSpace(serviceName))
	if s.opts.DisableSearch || serviceName == "" || !supported {
		return nil, nil
	}
	if names, ok, err := s.fastNames(ctx, stmt, kind, serviceName); ok {
		return names, err
	}
	if !s.feat.traceIDHigh {
		query = queryNoHigh
	}
	return s.selectNames(ctx, stmt, query, serviceName)
}

// selectNames runs a query of one string column and returns its distinct
// non-empty values, sorted.
func (s *Store) selectNames(ctx context.Context, stmt, query string, args ...any) ([]string, error) {
	return s.selectNamesOn(ctx, s.read, stmt, query, args...)
}

// selectNamesOn is selectNames on db.
func (s *Store) selectNamesOn(ctx context.Context, db *sql.DB, stmt, query string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(stmtname.With(ctx, stmt), query, args...)
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
