package pgstore

import "context"

// WalkAllTerms makes s treat every annotation-query term as frequent, so
// that GetTraces checks terms on the fragments it walks instead of reading
// them through the GIN index (which it does for rare terms, as every term
// of a small table is).
func WalkAllTerms(s *Store) {
	s.terms.mu.Lock()
	s.terms.all = true
	s.terms.mu.Unlock()
}

// SetDrainRows makes each of s's drain transactions take at most n queue
// rows, so that tests can drain part of the queue.
func SetDrainRows(s *Store, n int) { s.drainLimit = n }

// DrainOnce runs one drain transaction on s (waiting for a running one)
// and returns how many queue rows it took.
func DrainOnce(ctx context.Context, s *Store) (int, error) { return s.drainOnce(ctx, true) }
