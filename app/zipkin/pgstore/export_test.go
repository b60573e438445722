package pgstore

// WalkAllTerms makes s treat every annotation-query term as frequent, so
// that GetTraces checks terms on the fragments it walks instead of reading
// them through the GIN index (which it does for rare terms, as every term
// of a small table is).
func WalkAllTerms(s *Store) {
	s.terms.mu.Lock()
	s.terms.all = true
	s.terms.mu.Unlock()
}
