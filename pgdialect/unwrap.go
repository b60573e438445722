package pgdialect

import (
	"database/sql/driver"

	"github.com/sqlpool/sqlpool/pool"
)

// UnwrapFor returns the driver connection under dc — what sql.Conn.Raw passes: one of the
// pool's connections, or a driver's own — for a borrower that runs on it only the statements
// in queries, such as a COPY through pgx's CopyFrom. The pool's session tracker records them
// as if they had run through database/sql, so the session stays known: a COPY, or BEGIN, COPY
// and COMMIT, leaves nothing to reset at release (no round trip), where pool.Unwrap marks the
// session unknown (a full reset at release, and pgx's cached statements re-prepared when the
// borrower changed how names resolve). Name every statement run on the connection, BEGIN and
// COMMIT included, in full text: one left out (a SET, a CREATE TEMP TABLE) stays on the
// connection for the next borrower. A borrower that must run something unforeseen calls
// pool.Unwrap(dc) first, which marks the session unknown again. The transaction status is read
// from the driver at release, so a transaction the borrower opened and ended (or rolled back)
// needs no ROLLBACK. Queries may be empty: the borrower runs no statement (it reads the
// driver connection's state). On a connection not from the pool it returns dc's driver.Conn,
// like pool.Unwrap.
func UnwrapFor(dc any, queries ...string) driver.Conn {
	if u, ok := dc.(interface{ UnwrapRan(...string) driver.Conn }); ok {
		return u.UnwrapRan(queries...)
	}
	return pool.Unwrap(dc)
}
