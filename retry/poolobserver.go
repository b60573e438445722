package retry

import "database/sql"

// poolObserver returns the Observer of the sqlpool pool behind db, or nil: a pool whose
// Config.Trace is package metrics' Trace answers RetryObserver through its driver. Tx uses it
// when the Policy has no Observer, so that instrumenting the pool instruments its retries too.
func poolObserver(db *sql.DB) Observer {
	if db == nil {
		return nil
	}
	d, ok := db.Driver().(interface{ RetryObserver() any })
	if !ok {
		return nil
	}
	o, _ := d.RetryObserver().(Observer)
	return o
}
