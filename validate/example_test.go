package validate_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/validate"
)

func ExampleIsFatal() {
	shutdown := &mysql.MySQLError{Number: 1053, SQLState: [5]byte{'0', '8', 'S', '0', '1'}, Message: "Server shutdown in progress"}
	duplicate := &mysql.MySQLError{Number: 1062, SQLState: [5]byte{'2', '3', '0', '0', '0'}, Message: "Duplicate entry '1' for key 'PRIMARY'"}

	for _, err := range []error{
		fmt.Errorf("insert span: %w", shutdown),
		duplicate,
		driver.ErrBadConn,
		context.Canceled,
	} {
		fatal, reason := validate.IsFatal(err)
		fmt.Printf("%v %q\n", fatal, reason)
	}
	// Output:
	// true "server shutdown (1053)"
	// false ""
	// true "driver: bad connection"
	// false ""
}

func ExampleClassify() {
	readOnlyTx := &mysql.MySQLError{Number: 1792, SQLState: [5]byte{'2', '5', '0', '0', '6'}, Message: "Cannot execute statement in a READ ONLY transaction."}

	// The borrower opened START TRANSACTION READ ONLY itself: its own mistake.
	fatal, reason := validate.Classify(readOnlyTx, validate.Session{ReadOnlyTx: true})
	fmt.Printf("%v %q\n", fatal, reason)
	// Nobody asked for a read-only transaction: the server became a reader.
	fatal, reason = validate.Classify(readOnlyTx, validate.Session{})
	fmt.Printf("%v %q\n", fatal, reason)
	// Output:
	// false ""
	// true "read-only transaction the borrower did not open (1792)"
}

func ExampleServerGone() {
	killed := &mysql.MySQLError{Number: 1927, SQLState: [5]byte{'7', '0', '1', '0', '0'}, Message: "Connection was killed"}
	tooBig := &mysql.MySQLError{Number: 1153, SQLState: [5]byte{'0', '8', 'S', '0', '1'}, Message: "Got a packet bigger than 'max_allowed_packet' bytes"}

	fmt.Println(validate.ServerGone(killed)) // probe every older idle connection
	fmt.Println(validate.ServerGone(tooBig)) // only this connection is lost
	fmt.Println(validate.IsFatal(tooBig))
	// Output:
	// true
	// false
	// true packet bigger than max_allowed_packet (1153)
}

func ExampleCheck() {
	err := fmt.Errorf("query: %w", &mysql.MySQLError{
		Number:   1290,
		SQLState: [5]byte{'H', 'Y', '0', '0', '0'},
		Message:  "The MariaDB server is running with the --read-only option so it cannot execute this statement",
	})
	v := validate.Check(err, validate.Session{})
	fmt.Printf("fatal=%v serverGone=%v reason=%q\n", v.Fatal, v.ServerGone, v.Reason)
	// Output:
	// fatal=true serverGone=true reason="read-only server (1290 --read-only)"
}

func ExampleCodes() {
	for _, c := range validate.Codes()[:3] {
		fmt.Println(c.Number, c.SQLState, c.Name, c.ServerGone)
	}
	// Output:
	// 1047 08S01 ER_UNKNOWN_COM_ERROR true
	// 1053 08S01 ER_SERVER_SHUTDOWN true
	// 1077 HY000 ER_NORMAL_SHUTDOWN true
}

// hungConn is a driver connection whose server never answers a ping.
type hungConn struct{}

func (hungConn) Prepare(string) (driver.Stmt, error) { return nil, errors.ErrUnsupported }
func (hungConn) Close() error                        { return nil }
func (hungConn) Begin() (driver.Tx, error)           { return nil, errors.ErrUnsupported }
func (hungConn) Ping(ctx context.Context) error      { <-ctx.Done(); return ctx.Err() }

func ExampleProbe() {
	err := validate.Probe(context.Background(), hungConn{}, 20*time.Millisecond)
	fmt.Println(err)
	fmt.Println(validate.IsFatal(err))
	// Output:
	// validate: probe timed out
	// true probe timed out
}

func ExampleNeedsProbe() {
	fmt.Println(validate.NeedsProbe(100*time.Millisecond, validate.DefaultAliveBypassWindow))
	fmt.Println(validate.NeedsProbe(2*time.Second, validate.DefaultAliveBypassWindow))
	// Output:
	// false
	// true
}
