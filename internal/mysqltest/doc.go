// Package mysqltest provides MySQL-compatible servers and network tooling for
// sqlpool's tests and demos.
//
// It offers three kinds of server:
//
//   - A go-mysql-server with an in-memory database, in a child process built
//     from the application module's cmd/embedded-mysql through go.work
//     (StartEmbedded, EmbeddedDSN, NewEmbedded). It needs nothing installed
//     and is the default for tests.
//   - An externally configured MariaDB, named by the MYSQL_TEST_DSN and
//     MYSQL_TEST_DSN_UNPRIVILEGED environment variables (DSN, IsMariaDB,
//     UnprivilegedDSN, RequireMariaDB). .ci/run starts one with
//     scripts/mariadb-up and sets them.
//   - A private mariadbd (StartMariaDB for one test, StartMariaDBServer for
//     commands such as internal/cmd/mariadb-up), which its owner may stop,
//     start and restart.
//
// Proxy is a TCP proxy that counts bytes and MySQL packets in each direction
// and injects faults (latency, blackhole, resets, early close, refused
// connections).
//
// When SQLPOOL_REQUIRE_MARIADB=1, every test that would be skipped for want of
// MariaDB fails instead, so that CI cannot pass by skipping.
package mysqltest
