// Package embedded runs go-mysql-server, an in-memory MySQL-protocol server,
// inside the calling process on 127.0.0.1.
//
// It is what cmd/zipkin-mysql runs when no MySQL server is configured, what
// the examples run on, and, through cmd/embedded-mysql, the server the
// library's tests use when no MariaDB is configured. Data lives in memory
// and is gone when the server stops: it is for trying things out and for
// tests, not for keeping data.
package embedded
