package sqlmockpool_test

import (
	"context"
	"fmt"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlpool/sqlpool/sqlmockpool"
)

// A test of code that leaves autocommit off: the pool's release plan (ROLLBACK, then
// SET autocommit=1) is part of what the test expects. In a test, New(t, …) replaces Open and
// checks the expectations when the test ends.
func ExampleOpen() {
	mp, err := sqlmockpool.Open(sqlmockpool.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mp.Close()
	ctx := context.Background()

	mp.Mock.ExpectExec("SET autocommit = 0").WillReturnResult(sqlmock.NewResult(0, 0))
	mp.Mock.ExpectExec("DELETE FROM sessions").WillReturnResult(sqlmock.NewResult(0, 3))
	mp.ExpectRelease("ROLLBACK", "SET autocommit=1")

	c, err := mp.DB.Conn(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = c.ExecContext(ctx, "SET autocommit = 0")
	_, _ = c.ExecContext(ctx, "DELETE FROM sessions")
	_ = c.Close() // the borrow ends: the pool sends its release plan

	fmt.Println("expectations met:", mp.ExpectationsWereMet() == nil)
	// Output: expectations met: true
}

// Without the release plan among the expectations, the check fails and says what the pool sent
// (go-sqlmock's own ExpectationsWereMet passes: the pool discarded the connection quietly).
func ExamplePool_ExpectationsWereMet() {
	mp, err := sqlmockpool.Open(sqlmockpool.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mp.Close()
	ctx := context.Background()

	mp.Mock.ExpectExec("SET autocommit = 0").WillReturnResult(sqlmock.NewResult(0, 0))
	c, err := mp.DB.Conn(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = c.ExecContext(ctx, "SET autocommit = 0")
	_ = c.Close()

	fmt.Println("go-sqlmock:", mp.Mock.ExpectationsWereMet())
	fmt.Println(mp.ExpectationsWereMet())
	// Output:
	// go-sqlmock: <nil>
	// sqlmockpool: the pool's release plan failed; expect its statements with ExpectRelease: release plan (autocommit changed) failed at "SET autocommit=1": all expectations were already fulfilled, call to ExecQuery 'SET autocommit=1' with args [] was not expected
}
