// Package replica sends reads to read replicas and writes to the primary, with read-your-writes,
// for database/sql users: MariaDB GTID replication (MariaDB) and PostgreSQL streaming
// replication (PostgreSQL).
//
// A Router holds two *sql.DB over the pools of a primary and its replicas (any
// driver.Connector; usually *pool.Pool): Writer sends everything to the primary, Reader sends
// each borrow — a query, a transaction, a sql.Conn — to a replica. database/sql picks a
// connection before a driver sees a call's options, so this is the unit a caller can state;
// with Config.RouteReadOnly, a read-only transaction begun as a borrow's first call on the
// writer goes where a reader borrow would. Nothing else on the writer goes to a replica.
//
// Read-your-writes: a commit through the writer, with a Token in its context (WithToken, or
// WithKey for one the Router keeps per key), reads its position (one round trip) into the
// Token; a read through the reader with that Token goes to a replica whose position, polled in
// the background every PollInterval, covers the Token (no extra round trip), else waits on one
// (MASTER_GTID_WAIT; a poll of pg_last_wal_replay_lsn()) up to WaitTimeout, else reads the
// primary. A Token never reads an older state than it read before (monotonic reads), and can
// travel as text (Token.String, Router.ParseToken) between instances of an application. Mode
// PoolWide makes every read wait for every commit made through the writer before it.
//
// Lag and health: a replica whose lag passes MaxReplicaLag, whose poll fails, or whose
// connection was found gone, gets no reads until a poll succeeds; with no usable replica reads
// go to the primary. A replica's pool over a one-host cluster.Connector adds its heartbeat and
// probes (Replica.Up). Stats and Collector give the figures per replica.
//
// The package imports no driver: the MariaDB and PostgreSQL specifics are SQL text (Flavor).
// See docs/replicas.md.
package replica
