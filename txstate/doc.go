// Package txstate answers, for a connection pool releasing a MySQL or
// MariaDB connection, "what did this borrower leave behind?": an open
// transaction, autocommit off, table or user locks, another database,
// another isolation level or access mode, temporary tables, changed session
// variables (time_zone, sql_mode, character sets, timeouts: restored to the
// connection's baseline with one SET), or state it cannot know.
//
// Classify sorts one statement's text into a Class. A Tracker, one per
// physical connection, is fed the driver's Begin, Commit and Rollback calls
// and the text of every statement the borrower runs; at release, Clean says
// whether anything needs doing (the common case costs a field read and zero
// round trips), and Plan gives the cheapest way back to the Baseline
// recorded at connect: nothing, a few reset statements (ROLLBACK first), or
// discarding the connection.
//
// Whenever the text is ambiguous, the answer errs toward a reset or a
// discard, never toward clean. docs/sessions.md in the repository maps every
// class to its effect and release action and explains the choices.
//
// The package uses only the standard library and no regular expressions;
// Tracker.Statement does not allocate.
package txstate
