package replica

import (
	"context"
	"database/sql/driver"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MariaDB is the Flavor of MariaDB's GTID replication (MASTER_USE_GTID). After a commit the
// router reads the session's @@last_gtid (one round trip: go-sql-driver does not enable session
// tracking); the primary's position is @@gtid_binlog_pos (the primary needs its binary log,
// log_bin), a replica's @@gtid_slave_pos, and a read waits with MASTER_GTID_WAIT. A position
// covers another when it has reached every one of the other's replication domains' sequence
// numbers. The replicas' user needs no privilege beyond reading; MASTER_GTID_WAIT needs none.
var MariaDB Flavor = mariaDB{}

type mariaDB struct{}

func (mariaDB) Name() string { return "mariadb" }

func (mariaDB) Parse(s string) (Position, error) { return parseGTIDs(s) }

func (f mariaDB) CommitPosition(ctx context.Context, dc driver.Conn) (Position, error) {
	return f.query(ctx, dc, "SELECT @@last_gtid")
}

func (f mariaDB) PrimaryPosition(ctx context.Context, dc driver.Conn) (Position, error) {
	return f.query(ctx, dc, "SELECT @@gtid_binlog_pos")
}

func (f mariaDB) ReplicaPosition(ctx context.Context, dc driver.Conn) (Position, error) {
	return f.query(ctx, dc, "SELECT @@gtid_slave_pos")
}

func (mariaDB) query(ctx context.Context, dc driver.Conn, q string) (Position, error) {
	s, null, err := queryText(ctx, dc, q)
	if err != nil {
		return nil, err
	}
	if null {
		return nil, fmt.Errorf("%s: %w", q, errNull)
	}
	return parseGTIDs(s)
}

func (mariaDB) Wait(ctx context.Context, dc driver.Conn, p Position, timeout time.Duration) (bool, error) {
	// The position's text is our own (digits, '-' and ','), so it is safe inline.
	q := fmt.Sprintf("SELECT MASTER_GTID_WAIT('%s', %.6f)", posString(p), max(timeout.Seconds(), 0.000001))
	s, null, err := queryText(ctx, dc, q)
	if err != nil {
		return false, err
	}
	// 0: reached; -1: timed out; NULL: the argument was not a GTID position.
	if null {
		return false, fmt.Errorf("%s: %w", q, errNull)
	}
	return strings.TrimSpace(s) == "0", nil
}

// gtid is one MariaDB GTID, domain-server-sequence.
type gtid struct {
	domain, server uint32
	seq            uint64
}

// gtids is a MariaDB GTID position: at most one GTID per domain, sorted by domain.
type gtids []gtid

func parseGTIDs(s string) (gtids, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return gtids{}, nil
	}
	var out gtids
	for _, part := range strings.Split(s, ",") {
		f := strings.Split(strings.TrimSpace(part), "-")
		if len(f) != 3 {
			return nil, fmt.Errorf("replica: %q is not a MariaDB GTID position (domain-server-sequence, comma-separated)", s)
		}
		d, err1 := strconv.ParseUint(f[0], 10, 32)
		sv, err2 := strconv.ParseUint(f[1], 10, 32)
		q, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("replica: %q is not a MariaDB GTID position (domain-server-sequence, comma-separated)", s)
		}
		out = out.with(gtid{uint32(d), uint32(sv), q})
	}
	return out, nil
}

// with returns g with x merged in (the higher sequence number of x's domain wins).
func (g gtids) with(x gtid) gtids {
	i, found := slices.BinarySearchFunc(g, x.domain, func(e gtid, d uint32) int { return int(int64(e.domain) - int64(d)) })
	if found {
		if x.seq > g[i].seq {
			g[i] = x
		}
		return g
	}
	return slices.Insert(g, i, x)
}

func (g gtids) seqOf(domain uint32) (uint64, bool) {
	for _, e := range g {
		if e.domain == domain {
			return e.seq, true
		}
	}
	return 0, false
}

func (g gtids) Covers(p Position) bool {
	o, ok := p.(gtids)
	if !ok {
		return p == nil
	}
	for _, e := range o {
		s, ok := g.seqOf(e.domain)
		if !ok || s < e.seq {
			return false
		}
	}
	return true
}

func (g gtids) Merge(p Position) Position {
	o, ok := p.(gtids)
	if !ok || len(o) == 0 {
		return g
	}
	if g.Covers(o) {
		return g
	}
	if o.Covers(g) {
		return o
	}
	out := slices.Clone(g)
	for _, e := range o {
		out = out.with(e)
	}
	return out
}

func (g gtids) String() string {
	var b strings.Builder
	for i, e := range g {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(e.domain), 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatUint(uint64(e.server), 10))
		b.WriteByte('-')
		b.WriteString(strconv.FormatUint(e.seq, 10))
	}
	return b.String()
}
