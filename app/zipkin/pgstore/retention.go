package pgstore

import (
	"context"
	"fmt"
	"time"
)

// DeleteBefore deletes the span fragments whose timestamp is before cutoff
// and returns how many it deleted. Fragments without a timestamp are kept
// (a trace's late annotations are usually sent without one; they go when a
// later cutoff deletes nothing else of theirs — they are few). Names and
// autocomplete values are kept, as in Zipkin's MySQL store, which has no
// time bound on them. It deletes in rounds of at most 10,000 rows, each its
// own statement, so that it never holds many locks; ctx stops it between
// rounds.
func (s *Store) DeleteBefore(ctx context.Context, cutoff time.Time) (int64, error) {
	micros := cutoff.UnixMicro()
	const q = "DELETE FROM " + tableSpans + " WHERE ctid IN (SELECT ctid FROM " + tableSpans +
		" WHERE start_ts < $1 LIMIT 10000)"
	var total int64
	for {
		res, err := s.db.ExecContext(ctx, q, micros)
		if err != nil {
			return total, fmt.Errorf("pgstore: deleting spans before %s: %w", cutoff.UTC().Format(time.RFC3339), err)
		}
		n, _ := res.RowsAffected()
		total += n
		if n < 10000 {
			return total, nil
		}
	}
}
