package stmtname_test

import (
	"context"
	"fmt"

	"github.com/sqlpool/sqlpool/stmtname"
)

func Example() {
	ctx := stmtname.With(context.Background(), "get_user")
	// db.QueryRowContext(ctx, "SELECT name FROM users WHERE id = ?", id) is
	// then timed under statement="get_user".
	name, ok := stmtname.From(ctx)
	fmt.Println(name, ok)
	// Output: get_user true
}
