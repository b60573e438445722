package retry

import "database/sql/driver"

// poolObserver returns the Observer of the sqlpool pool behind db, or nil: a pool whose
// Config.Trace is package metrics' Trace answers RetryObserver through its driver, as it
// answers Dialect (dialectOf). Tx uses it when the Policy has no Observer, so that
// instrumenting the pool instruments its retries too.
func poolObserver(db Beginner) Observer {
	dr, ok := db.(interface{ Driver() driver.Driver })
	if !ok {
		return nil
	}
	d, ok := dr.Driver().(interface{ RetryObserver() any })
	if !ok {
		return nil
	}
	o, _ := d.RetryObserver().(Observer)
	return o
}
