package mysqlstore

// SetAfterBatch makes r call f after each batch it commits.
func SetAfterBatch(r *Retention, f func()) { r.afterBatch = f }
