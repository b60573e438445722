package replica

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PostgreSQL is the Flavor of PostgreSQL's streaming replication. After a commit the router
// reads pg_current_wal_insert_lsn() (one round trip): the end of the WAL inserted so far, which
// covers the commit's record even when synchronous_commit is off and the record is not yet
// written (pg_current_wal_lsn() may then be behind it). The primary's position is the same
// function, a standby's pg_last_wal_replay_lsn(), and a read waits by polling
// pg_last_wal_replay_lsn() every 2 ms (PostgreSQL 15 has no wait function). A position is an
// LSN; one covers another when it is not smaller.
var PostgreSQL Flavor = postgres{}

type postgres struct{}

func (postgres) Name() string { return "postgresql" }

func (postgres) Parse(s string) (Position, error) { return parseLSN(s) }

func (f postgres) CommitPosition(ctx context.Context, dc driver.Conn) (Position, error) {
	return f.query(ctx, dc, "SELECT pg_current_wal_insert_lsn()::text")
}

func (f postgres) PrimaryPosition(ctx context.Context, dc driver.Conn) (Position, error) {
	return f.query(ctx, dc, "SELECT pg_current_wal_insert_lsn()::text")
}

func (f postgres) ReplicaPosition(ctx context.Context, dc driver.Conn) (Position, error) {
	return f.query(ctx, dc, "SELECT pg_last_wal_replay_lsn()::text")
}

func (postgres) query(ctx context.Context, dc driver.Conn, q string) (Position, error) {
	s, null, err := queryText(ctx, dc, q)
	if err != nil {
		return nil, err
	}
	if null {
		// pg_last_wal_replay_lsn() is NULL on a server that is not a standby.
		return nil, fmt.Errorf("%s: %w (is the server a standby?)", q, errNull)
	}
	return parseLSN(s)
}

func (f postgres) Wait(ctx context.Context, dc driver.Conn, p Position, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		have, err := f.ReplicaPosition(ctx, dc)
		if err != nil {
			if ctx.Err() == context.DeadlineExceeded {
				return false, nil
			}
			return false, err
		}
		if covers(have, p) {
			return true, nil
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return false, nil
			}
			return false, ctx.Err()
		case <-t.C:
		}
	}
}

// lsn is a PostgreSQL WAL location.
type lsn uint64

func parseLSN(s string) (Position, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return lsn(0), nil
	}
	hi, lo, ok := strings.Cut(s, "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		return nil, fmt.Errorf("replica: %q is not a PostgreSQL LSN (hex/hex)", s)
	}
	return lsn(h<<32 | l), nil
}

func (a lsn) Covers(p Position) bool {
	b, ok := p.(lsn)
	if !ok {
		return p == nil
	}
	return a >= b
}

func (a lsn) Merge(p Position) Position {
	if b, ok := p.(lsn); ok && b > a {
		return b
	}
	return a
}

func (a lsn) String() string { return fmt.Sprintf("%X/%X", uint64(a)>>32, uint64(a)&0xFFFFFFFF) }
