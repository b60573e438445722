// Package sqlstate says what a PostgreSQL SQLSTATE code means for the connection that returned
// it and for the transaction it ran in. Package pgdialect (the pool's verdict) and package retry
// (whether to run a transaction again) both read it; retry gets the code from the SQLState
// method that pgx's *pgconn.PgError and lib/pq's *pq.Error have, so it imports no driver.
package sqlstate

// Meaning is what one SQLSTATE code means.
type Meaning struct {
	// Fatal: the connection must not be used again.
	Fatal bool
	// Gone: the server itself is going away or changed role (it is never true unless Fatal is).
	Gone bool
	// Retry: the transaction may run again from the start: the server rolled it back (40001,
	// 40P01), only the statement failed and the caller rolls back (55P03), or the connection
	// ended before COMMIT, which rolls an open transaction back.
	Retry bool
	// Refused: the server refused the statement or the connection before running anything, so
	// even a COMMIT that failed so was not applied.
	Refused bool
	// Unknown: the server says the transaction's outcome is unknown (08007).
	Unknown bool
	// Reason is a short static description of a fatal code; empty otherwise.
	Reason string
}

var codes = map[string]Meaning{
	"57P01": {Fatal: true, Gone: true, Retry: true, Reason: "admin shutdown or terminated (57P01)"},
	"57P02": {Fatal: true, Gone: true, Retry: true, Reason: "crash shutdown (57P02)"},
	"57P03": {Fatal: true, Gone: true, Retry: true, Refused: true, Reason: "cannot connect now (57P03)"},
	"57P04": {Fatal: true, Reason: "database dropped (57P04)"},
	"57P05": {Fatal: true, Retry: true, Reason: "idle session timeout (57P05)"},
	"25P03": {Fatal: true, Retry: true, Reason: "idle-in-transaction session timeout (25P03)"},
	"25P04": {Fatal: true, Reason: "transaction timeout (25P04)"},
	"53300": {Fatal: true, Retry: true, Refused: true, Reason: "too many connections (53300)"},
	"08007": {Fatal: true, Unknown: true, Reason: "transaction resolution unknown (08007)"},
	"40001": {Retry: true},
	"40P01": {Retry: true},
	"55P03": {Retry: true},
}

// Lookup returns the meaning of state and true, or false for a code that says nothing about the
// connection or the transaction beyond "this statement failed" (23505, 42601, ...). readOnlyTx
// reports that the caller itself opened a read-only transaction: 25006 (read-only transaction)
// is then its own mistake; otherwise 25006 means a standby or a demoted primary.
func Lookup(state string, readOnlyTx bool) (Meaning, bool) {
	if m, ok := codes[state]; ok {
		return m, true
	}
	switch {
	case state == "25006" && !readOnlyTx:
		return Meaning{Fatal: true, Gone: true, Retry: true, Refused: true,
			Reason: "read-only transaction the borrower did not open (25006): a standby or demoted primary"}, true
	case len(state) == 5 && state[:2] == "08":
		return Meaning{Fatal: true, Retry: true, Reason: "connection exception (SQLSTATE class 08)"}, true
	}
	return Meaning{}, false
}

// Login reports whether state is the server refusing a login for a reason a retry does not fix:
// 28P01 (invalid password), 28000 (invalid authorization specification: no pg_hba.conf entry,
// no such role, role may not log in) and 3D000 (no such database).
func Login(state string) bool {
	return state == "28P01" || state == "28000" || state == "3D000"
}
