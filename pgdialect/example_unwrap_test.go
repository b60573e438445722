package pgdialect_test

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlpool/sqlpool/pgdialect"
)

// A COPY on the connection the pool lends, with the statements named so that the session stays
// known: no reset at release. db is a pool's OpenDB() on pgx's stdlib connector; the table
// exists.
func ExampleUnwrapFor() {
	var db *sql.DB // p.OpenDB()
	if db == nil {
		return
	}
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	rows := [][]any{{int64(1), "a"}, {int64(2), "b"}}
	err = c.Raw(func(dc any) error {
		const copySQL = `COPY "items" ( "id", "name" ) FROM STDIN BINARY`
		pc := pgdialect.UnwrapFor(dc, copySQL).(*stdlib.Conn).Conn()
		_, err := pc.CopyFrom(ctx, pgx.Identifier{"items"}, []string{"id", "name"}, pgx.CopyFromRows(rows))
		return err
	})
	if err != nil {
		fmt.Println(err)
	}
}
