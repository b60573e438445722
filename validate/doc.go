// Package validate answers one question for the pool: is this connection
// still good?
//
// It has three parts.
//
//   - The alive-bypass policy: a connection returned to the pool less than
//     [DefaultAliveBypassWindow] ago is handed out again without a probe,
//     as HikariCP does with aliveBypassWindowMs. [NeedsProbe] states the rule.
//   - The probe: [Probe] pings a driver connection within a timeout and
//     reports whether it answered.
//   - The error tables: [IsFatal], [Classify] and [Check] say whether an error
//     returned by a connection means that connection must never be used
//     again, and [ServerGone] says whether the error means the whole server
//     went away, so that every idle connection opened before it must be
//     probed on its next borrow. [Codes] and [Sentinels] list the tables.
//
// # What is fatal
//
// An error is fatal when it shows that the connection's socket or protocol
// state is broken, or that the connection now points at a server that can no
// longer serve it (a read-only server after a failover, a Galera node that
// is not ready). In order of evaluation:
//
//  1. nil is not fatal.
//  2. An error that is, or wraps, [context.Canceled] or
//     [context.DeadlineExceeded] is never fatal: the caller gave up, the
//     server did nothing wrong. go-sql-driver/mysql closes the socket when a
//     context is cancelled during a call, so the pool still sees that
//     connection as closed (driver.Validator reports it invalid) and discards
//     it; it is simply not counted as a database failure. The net package's
//     own context errors ("operation was canceled", "i/o timeout" from a
//     dial whose context expired) match these too and are treated the same.
//  3. The sentinel errors in [Sentinels], matched with errors.Is semantics
//     anywhere in the chain (fmt.Errorf %w and errors.Join included):
//     driver.ErrBadConn, mysql.ErrInvalidConn, mysql.ErrPktSync,
//     mysql.ErrPktSyncMul, mysql.ErrMalformPkt, mysql.ErrBusyBuffer, io.EOF,
//     io.ErrUnexpectedEOF, io.ErrShortWrite, net.ErrClosed and
//     [ErrProbeTimeout]. The package does not import go-sql-driver: its
//     sentinels are recognised by their type (errors.New's) and exact text.
//  4. A *mysql.MySQLError whose number is in [Codes] and whose condition
//     holds, or whose SQLSTATE is in class 08 (connection exception). It is
//     read through reflection, its layout checked once against the fields
//     read (Number, SQLState, Message); a driver version with another layout
//     is not read.
//  5. The socket errors ECONNRESET, EPIPE, ECONNREFUSED, ECONNABORTED,
//     ETIMEDOUT, EHOSTUNREACH and ENETUNREACH (syscall.Errno).
//  6. Any other net.Error, timeouts included: a read or write deadline that
//     expires on the socket (go-sql-driver's readTimeout / writeTimeout)
//     leaves the protocol in an unknown state. Only the caller's context is
//     exempt, by rule 2.
//
// Everything else is not fatal: a server error such as a duplicate key
// (1062), a deadlock (1213), a lock wait timeout (1205) or a syntax error
// (1064) proves the server answered, so the connection is fine.
// sql.ErrNoRows, driver.ErrSkip and mysql.ErrPktTooLarge (checked before
// anything is written) are not fatal either.
//
// # Conditional codes
//
// Four numbers are fatal only in context:
//
//   - 1290 ER_OPTION_PREVENTS_STATEMENT is fatal only when the message names
//     the read-only options ("--read-only", "--super-read-only"): that is a
//     writer that became a reader, typically after an Aurora or MariaDB
//     failover. The same number is raised for --secure-file-priv and other
//     options, which say nothing about the connection.
//   - 1792 ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION is fatal only when the
//     borrower did not open a read-only transaction itself
//     ([Session].ReadOnlyTx false). [IsFatal] knows nothing of the session
//     and so treats 1792 as fatal; the pool, which tracks transactions,
//     calls [Classify] or [Check].
//   - 4031 is ER_CLIENT_INTERACTION_TIMEOUT on MySQL 8.0.24 and later (the
//     server's farewell before it closes a connection idle past
//     wait_timeout) but ER_REFERENCED_TRG_DOES_NOT_EXIST on MariaDB, a
//     trigger DDL error. It is fatal when the message mentions inactivity or
//     wait_timeout, or is empty.
//   - SQLSTATE 70100 is deliberately not a class rule: it is shared by 1927
//     (connection killed, fatal) and by 1317 and 1969 (query interrupted,
//     statement timeout), which leave the connection usable.
//
// # Server gone
//
// [ServerGone] is true for the subset of fatal errors that say the server as
// a whole went away or changed role, so that other connections opened
// before the error are suspect too: shutdown (1053, 1077, 1079, 1080), a
// killed connection (1927, which is also what every client sees when all
// threads are killed), Galera not ready (1047), the read-only failover codes
// (1290 with --read-only, 1836, 1792 not opened by the borrower), and a peer
// that dropped or refused the socket (io.EOF, io.ErrUnexpectedEOF,
// mysql.ErrInvalidConn, which is how go-sql-driver reports a read failure
// after a command was sent, ECONNRESET, EPIPE, ECONNREFUSED). A restart that
// kills the server without a word is seen only as such transport errors,
// which is why they count. A false alarm costs one extra probe per idle
// connection.
//
// Per-connection faults are not ServerGone: 1152, 1153, 1154-1161 and 1184
// (the server's own network errors on that one socket), 4031 (one
// connection idled out; idle connections older than the bypass window are
// probed anyway), timeouts (under a network blackhole every extra probe
// would only wait out its own timeout), protocol errors (ErrPktSync,
// ErrMalformPkt, ErrBusyBuffer) and driver.ErrBadConn (database/sql and the
// driver also use it for connections they closed themselves).
package validate
