// Command embedded-mysql serves an in-memory MySQL-protocol server
// (go-mysql-server, see package embedded) on 127.0.0.1 until it is stopped.
//
// It prints the go-sql-driver/mysql DSN of the server on its first line of
// standard output, for example
//
//	root@tcp(127.0.0.1:40123)/test
//
// and runs until SIGINT or SIGTERM, or, with -stdin, until its standard input
// is closed: a parent process that dies takes the server with it. The
// library's test helper (internal/mysqltest.StartEmbedded) runs it that way.
//
// Usage:
//
//	go run ./app/cmd/embedded-mysql [-addr 127.0.0.1:3306] [-stdin]
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/sqlpool/sqlpool/app/embedded"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on; port 0 picks a free port")
	stdin := flag.Bool("stdin", false, "also stop when standard input is closed")
	flag.Parse()

	dsn, stop, err := embedded.StartAt(*addr)
	if err != nil {
		log.Fatalf("embedded-mysql: %v", err)
	}
	fmt.Println(dsn)

	done := make(chan os.Signal, 1)
	signal.Notify(done, syscall.SIGINT, syscall.SIGTERM)
	if *stdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			done <- syscall.SIGTERM
		}()
	}
	<-done
	if err := stop(); err != nil {
		log.Fatalf("embedded-mysql: stop: %v", err)
	}
}
