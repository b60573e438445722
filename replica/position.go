package replica

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sqlpool/sqlpool/internal/rawconn"
)

// Position is a point in the primary's history: a MariaDB GTID position or a PostgreSQL WAL
// LSN. A nil Position is the start of history, covered by every position.
type Position interface {
	// Covers reports whether a server at this position has applied everything p has.
	Covers(p Position) bool
	// Merge returns the earliest position that covers both this one and p.
	Merge(p Position) Position
	// String returns the text Flavor.Parse reads back.
	String() string
}

// Flavor is what the router needs to know about one database's replication: how to read a
// position on the primary and on a replica, and how to wait for one. MariaDB and PostgreSQL
// are provided. Its methods are called on connections of the pools given to New and must be
// safe for concurrent use.
type Flavor interface {
	// Name names the flavor in errors and token text ("mariadb", "postgresql").
	Name() string
	// Parse reads a position written by Position.String; "" is the nil Position.
	Parse(s string) (Position, error)
	// CommitPosition returns, on the primary connection dc right after a commit on it, a
	// position that covers that commit (one round trip).
	CommitPosition(ctx context.Context, dc driver.Conn) (Position, error)
	// PrimaryPosition returns the primary's current position.
	PrimaryPosition(ctx context.Context, dc driver.Conn) (Position, error)
	// ReplicaPosition returns how far a replica has applied the primary's history.
	ReplicaPosition(ctx context.Context, dc driver.Conn) (Position, error)
	// Wait waits on the replica connection dc until it has applied p or timeout passes, and
	// reports whether it did.
	Wait(ctx context.Context, dc driver.Conn, p Position, timeout time.Duration) (bool, error)
}

// covers is a.Covers(b) with nil as the start of history.
func covers(a, b Position) bool {
	if b == nil {
		return true
	}
	if a == nil {
		switch b := b.(type) {
		case gtids:
			return len(b) == 0
		case lsn:
			return b == 0
		}
		return false
	}
	return a.Covers(b)
}

// merge is a.Merge(b) with nil as the start of history.
func merge(a, b Position) Position {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return a.Merge(b)
}

func posString(p Position) string {
	if p == nil {
		return ""
	}
	return p.String()
}

// queryText runs q on dc and returns the first column of its first row as text; null reports
// SQL NULL.
func queryText(ctx context.Context, dc driver.Conn, q string) (s string, null bool, err error) {
	rows, err := rawconn.Query(ctx, dc, q)
	if err != nil {
		return "", false, err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if len(dest) == 0 {
		return "", false, fmt.Errorf("%q returned no columns", q)
	}
	if err := rows.Next(dest); err != nil {
		if err == io.EOF {
			return "", false, fmt.Errorf("%q returned no row", q)
		}
		return "", false, err
	}
	switch v := dest[0].(type) {
	case nil:
		return "", true, nil
	case []byte:
		return string(v), false, nil
	case string:
		return v, false, nil
	default:
		return fmt.Sprint(v), false, nil
	}
}

var errNull = errors.New("the server returned NULL")
