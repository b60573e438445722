// Package bench is sqlpool's benchmark harness, after HikariCP-benchmark and JMH: a minimal
// stub driver (StubConnector), the three pools compared side by side (sqlpool, database-sql,
// naive-safe; on PostgreSQL also pgxpool behind stdlib.OpenDBFromPool), MySQL/MariaDB and
// PostgreSQL targets (OpenServer, OpenPostgres, the latter through pgx's stdlib or lib/pq), the
// benchmarks (cycleConnection, cycleStatement,
// cycleParamStatement, contended, saturated), closed-loop and open-loop runners, JMH's statistics
// (Student t 99.9 % confidence intervals) and the jmh command's logic (Run, used by
// bench/cmd/jmh). The same benchmarks exist as go test -bench functions in this package; see
// docs/benchmarks.md.
package bench
