// Package stmtname names the statements run with a context, for the SQL
// timers of package metrics (the statement label of sqlpool_statement_seconds
// and sqlpool_statement_errors_total).
//
// It imports nothing but the standard library, so that code which only labels
// its statements (a store, a repository layer) does not depend on the metrics
// package, Prometheus or the pool.
package stmtname

import "context"

type key struct{}

// With returns a copy of ctx that names the statements run with it: their
// series get statement=name instead of the name parsed from the SQL text.
// name must be one of a small, fixed set of values (such as "get_user"), never
// built from data: it is a metric label. The metrics package ignores a name
// that is empty, longer than metrics.MaxStatementNameLen bytes or not valid
// UTF-8.
func With(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, key{}, name)
}

// From returns the name set by With, if any. A nil ctx has none.
func From(ctx context.Context) (string, bool) {
	if ctx == nil {
		return "", false
	}
	name, ok := ctx.Value(key{}).(string)
	return name, ok
}
