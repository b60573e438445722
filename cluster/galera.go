package cluster

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// galeraStates names wsrep_local_state values.
var galeraStates = map[int]string{0: "Initialized", 1: "Joining", 2: "Donor/Desynced", 3: "Joined", 4: "Synced"}

// GaleraReady is a Config.Ready check for MariaDB Galera and Percona XtraDB Cluster: it asks
// the node for wsrep_local_state (one round trip, SHOW GLOBAL STATUS) and accepts only 4,
// Synced. A node that lost quorum (non-Primary) still accepts connections, answers pings and
// even SELECT 1, but fails every statement that touches a table with 1047; a joining node is
// not ready either; a donor (rsync state transfer) blocks writes while it copies, so it is
// avoided too. The connection must implement driver.QueryerContext (go-sql-driver/mysql's
// does).
func GaleraReady(ctx context.Context, conn driver.Conn) error {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return fmt.Errorf("GaleraReady: the connection (%T) cannot run queries (no driver.QueryerContext)", conn)
	}
	rows, err := q.QueryContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep_local_state'", nil)
	if err != nil {
		return fmt.Errorf("GaleraReady: %w", err)
	}
	defer rows.Close()
	vals := make([]driver.Value, len(rows.Columns()))
	if len(vals) != 2 {
		return fmt.Errorf("GaleraReady: SHOW GLOBAL STATUS returned %d columns, want 2", len(vals))
	}
	if err := rows.Next(vals); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("GaleraReady: not a Galera node (no wsrep_local_state status variable)")
		}
		return fmt.Errorf("GaleraReady: %w", err)
	}
	var s string
	switch v := vals[1].(type) {
	case []byte:
		s = string(v)
	case string:
		s = v
	default:
		s = fmt.Sprint(v)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("GaleraReady: wsrep_local_state is %q, not a number", s)
	}
	if n != 4 {
		name := galeraStates[n]
		if name == "" {
			name = "unknown"
		}
		return fmt.Errorf("Galera node not Synced: wsrep_local_state %d (%s), want 4 (Synced)", n, name)
	}
	return nil
}
