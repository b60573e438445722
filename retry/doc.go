// Package retry answers "is this worth another try, and when?" for work
// done against MySQL, MariaDB or PostgreSQL through database/sql, and runs
// that work again when it is.
//
// database/sql retries only driver.ErrBadConn, a fixed three times, and never
// inside a transaction. This package adds what it leaves out: [Classify]
// sorts an error into [Permanent], [Transient] or [Ambiguous]; [Do] runs
// work the caller declares idempotent and [Tx] runs a whole transaction
// (begin, fn, commit), again and again while the error is Transient, with
// exponential backoff and full jitter between attempts, a bounded number of
// attempts ([Policy]), and a shared [Budget] that keeps a retry storm from
// multiplying the load on a database that is already struggling.
//
// # Transaction starters
//
// [Tx] begins on any [Beginner] — *sql.DB (the pool's p.OpenDB()), *sql.Conn,
// sqlx's *sqlx.DB, an interface of the application's own with BeginTx — and
// hands fn the *sql.Tx. [TxWith] takes a begin function instead and hands fn
// a transaction of any type that has Commit and Rollback ([Committer]):
// sqlx's *sqlx.Tx with db.BeginTxx, or a small adapter around GORM's *gorm.DB
// (docs/retry.md has both recipes). Both run the same loop with the same
// classes, Policy and Observer events.
//
// # The pool's dialect
//
// [Policy].Dialect takes the pool's dialect (p.Dialect(); or
// mysqldialect.Dialect, pgdialect.Dialect, or a type of the application's
// own that embeds one and overrides Classify). [Tx] over a pool's *sql.DB
// finds it by itself when Policy.Dialect is nil. The rules below decide every
// error they name; an error they do not name is Transient when the dialect
// calls it transient (pool.ErrorClass.Transient) or fatal to its connection
// for a reason other than a refused login, and Permanent otherwise
// ([Policy.Classify]). Without a dialect such errors are Permanent.
//
// # Classes
//
// [Transient] means the whole unit of work — a transaction whose COMMIT was
// not sent, or work the caller declared idempotent — can safely run again:
//
//   - 1213 ER_LOCK_DEADLOCK: InnoDB rolled the whole transaction back.
//   - 1205 ER_LOCK_WAIT_TIMEOUT: InnoDB rolled back only the statement
//     (innodb_rollback_on_timeout=OFF); [Tx] rolls the transaction back
//     before it runs it again.
//   - 1040 ER_CON_COUNT_ERROR and 1203 ER_TOO_MANY_USER_CONNECTIONS: the
//     server refused a new connection; nothing ran.
//   - A server that turned read-only after a failover, as package validate
//     decides: 1290 when the message names --read-only or
//     --super-read-only (1290 for --secure-file-priv and the like is
//     Permanent), 1836 ER_READ_ONLY_MODE, and 1792
//     ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION unless [Tx] itself opened a
//     read-only transaction (sql.TxOptions.ReadOnly), which makes 1792 the
//     caller's own mistake and Permanent.
//   - 1047: a Galera node that is not ready (WSREP has not yet prepared node
//     for application use).
//   - driver.ErrBadConn: go-sql-driver/mysql returns it only when nothing
//     was written to the socket (or, with rejectReadOnly=true, when a
//     read-only server refused the statement), so nothing ran.
//   - A connection lost while the work was running: mysql.ErrInvalidConn,
//     io.EOF, io.ErrUnexpectedEOF, ECONNRESET and other network errors, a
//     refused dial, server shutdown (1053, 1077, 1079, 1080), a killed
//     connection (1927), the server's own network errors (1152, 1154-1161,
//     1184), MySQL's idle-timeout notice (4031), SQLSTATE class 08 — every
//     error validate.Check calls fatal, except 1153 (a packet too large
//     fails the same way every time: Permanent). Such a loss is Transient
//     only because of what this package runs: inside [Tx] before COMMIT,
//     the server rolls back the open transaction of a connection that went
//     away, so nothing of it survives; in [Do] the caller declared the work
//     idempotent, so running it twice is harmless. For a single
//     non-idempotent statement outside both, a connection lost after the
//     statement was sent leaves its outcome unknown; a caller that uses
//     Classify on such errors must treat only driver.ErrBadConn as "nothing
//     ran".
//
// [Ambiguous] means the outcome is unknown: a COMMIT may or may not have been
// applied. It is never retried, and the error returned matches
// [ErrAmbiguousCommit] with errors.Is. It is:
//
//   - 1180 ER_ERROR_DURING_COMMIT ("Got error %d during COMMIT"), wherever it
//     comes from;
//   - in [Tx], a Commit that fails in any way other than a plain server
//     answer: mysql.ErrInvalidConn, io.EOF, a network error, a server
//     shutdown or killed connection while COMMIT was in flight, or an error
//     the package does not know. Commit errors that prove nothing was
//     committed are classified as usual: driver.ErrBadConn (nothing sent) is
//     Transient; a server error answering the COMMIT (1213 from a Galera
//     certification failure, a read-only refusal) is Transient or Permanent
//     by the rules above; a context error or sql.ErrTxDone means database/sql
//     did not send COMMIT and is Permanent.
//
// [Permanent] is everything else: nil, the caller's context ending
// (context.Canceled and context.DeadlineExceeded anywhere in the chain win
// over every rule but Ambiguous — the package never retries past the
// caller's ctx), constraint and syntax errors, query timeouts and KILL QUERY
// (1317, 1969, 3024: the server worked as told), NOWAIT failures (3572),
// 1129 host blocked, sql.ErrNoRows, sql.ErrTxDone, and errors of other
// packages, such as pool.ErrPoolExhausted. An acquire timeout of package
// pool is classified by the last connection error it wraps: Transient after
// 1040 or a refused dial, Permanent when every connection was simply busy,
// and Permanent when the caller's ctx deadline ended it.
//
// # PostgreSQL
//
// A PostgreSQL server error is read through its SQLState method (pgx's
// *pgconn.PgError and lib/pq's *pq.Error both have it; this package imports
// neither driver). Outside COMMIT:
//
//   - Transient: 40001 serialization_failure and 40P01 deadlock_detected (the
//     server rolled the transaction back), 55P03 lock_not_available (Tx rolls
//     back), a connection that ended — 57P01 (terminated or admin shutdown),
//     57P02, 57P05, 25P03 (idle-in-transaction timeout), SQLSTATE class 08 —
//     or was refused — 57P03, 53300 —, and 25006 (a standby or a demoted
//     primary) unless Tx opened a read-only transaction itself. Outside
//     COMMIT an error whose SafeToRetry method reports true (pgx's connection
//     errors) is Transient too: a lost connection rolls an open transaction
//     back either way.
//   - Ambiguous: 08007 transaction_resolution_unknown.
//   - Permanent: every other code (23505, 42601, 57014 query_canceled, 57P04,
//     25P04, ...).
//
// As an answer to COMMIT, 40001, 40P01, 55P03 and the refusals (57P03,
// 53300, 25006) are Transient (not committed); a connection that ended
// while COMMIT was in flight (57P01, 57P02, 57P04, 57P05, 25P03, 25P04,
// class 08), 08007, and the classes a FATAL or PANIC may come with after the
// commit record was written (53, 57, 58, XX) are Ambiguous; any other code is
// Permanent (an ERROR answer to COMMIT: the server rolled the transaction
// back, e.g. 23505 from a deferred constraint). Without a SQLSTATE a failed
// COMMIT is Ambiguous, even when SafeToRetry reports true: pgx v5.12 reports
// a connection lost after it wrote COMMIT as "conn closed" with SafeToRetry
// true, and lib/pq returns driver.ErrBadConn whether or not COMMIT was sent.
// Through package pool with package pgdialect, lib/pq's driver.ErrBadConn
// from Commit, and pgx's context error from a COMMIT its context cut short,
// reach Tx as a pool.CommitUnknownError, so that they are Ambiguous too.
// Through plain database/sql, lib/pq's driver.ErrBadConn from Commit is read
// as "nothing was sent", as go-sql-driver/mysql means it, and pgx's context
// error as "COMMIT was not sent".
//
// An error that already went through [Do] or [Tx] (it wraps an [*Error]) is
// not retried again by an enclosing Do or Tx: nested retry loops would
// multiply the attempts (3 × 3 = 9 with the defaults). [Classify] itself
// still reports the class of the error inside.
//
// # Backoff
//
// Before retry n (n = 1 before the second attempt), [Do] and [Tx] wait a
// uniformly random time in [0, min(MaxDelay, BaseDelay × 2^(n−1))] — "full
// jitter", which spreads the retries of goroutines that failed together
// (two deadlock victims, every transaction of a failover) instead of
// synchronising them. The wait is a timer that the ctx interrupts; a ctx
// that ends during a wait ends the call with the ctx error and the last
// error, both reachable with errors.Is and errors.As.
//
// # Defaults
//
// Zero values mean defaults, in [Policy] and in [BudgetConfig]:
//
//	Policy.MaxAttempts            3       attempts in all, the first included  (negative: 1, no retries)
//	Policy.BaseDelay              10 ms   first backoff ceiling                (negative: no wait)
//	Policy.MaxDelay               1 s     backoff cap                          (negative: no cap)
//	Policy.Budget                 nil     the process-wide DefaultBudget()
//	Policy.Observer               nil     no hooks, no allocation
//	BudgetConfig.Window           10 s    Finagle's ttl                        (floor 10 ms)
//	BudgetConfig.MinRetriesPerSec 10      Finagle's minRetriesPerSec           (negative: 0)
//	BudgetConfig.Ratio            0.2     Finagle's percentCanRetry            (negative: 0; cap 1000)
//
// # Retry budget
//
// A [Budget] is a retry budget in the manner of Finagle's RetryBudget.
// Every call of [Do] or [Tx] deposits one call; every retry must withdraw
// one token, and gets one only while, over the sliding Window,
//
//	retries + 1 ≤ Ratio × calls + MinRetriesPerSec × Window(s)
//
// So within any one window the budget grants at most
//
//	Ratio × C + MinRetriesPerSec × Window(s)
//
// retries, C being the calls made in it, and N calls that all fail, made
// within one window, make at most
//
//	N × (1 + Ratio) + MinRetriesPerSec × T
//
// attempts in all, where T = Window in seconds. The floor term lets a
// process that has just started, or makes few calls, still retry; the
// ratio term scales with traffic, so under a storm at most a fifth more
// attempts (by default) reach the database than the callers made. With the
// defaults: 100 retries per 10 s for free, plus one retry per five calls.
// The window is kept as 10 buckets of Window/10, and calls and retries leave
// it a bucket at a time, so "one window" means any stretch of time no longer
// than 0.9 × Window (the first Window after [NewBudget] included); over
// longer stretches the average retry rate stays within Ratio × the call
// rate + MinRetriesPerSec × 10/9. Ratio is used to three decimals.
//
// A budget refuses a retry at once, without waiting; the call then returns
// the last error, wrapped so that it matches [ErrBudgetExhausted]. Budgets
// are safe for concurrent use; a deposit is one compare-and-swap on an atomic
// counter (no lock), a withdrawal takes the budget's mutex. Policies whose
// Budget is nil share one process-wide budget with default settings
// ([DefaultBudget]); give each database, or each workload that must not
// starve another, its own [NewBudget].
//
// # Hooks
//
// Policy.Observer receives every attempt, retry, budget refusal, ambiguous
// outcome and the end of every call, for package metrics; [Hooks] adapts
// plain functions. With a nil Observer nothing is called and [Do] allocates
// nothing when fn succeeds.
package retry
