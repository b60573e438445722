package validate

// ErrorNumber returns the MySQL/MariaDB error number of the first *mysql.MySQLError in err's
// chain (errors.Unwrap and errors.Join trees, at most 64 links deep), and false when there is
// none. It lets packages that must not depend on the driver (package pool) react to one server
// error, such as 1461 (too many prepared statements). It reads the error through reflection:
// this package does not import the driver.
func ErrorNumber(err error) (uint16, bool) {
	return errorNumber(err, 0)
}

func errorNumber(err error, depth int) (uint16, bool) {
	for ; err != nil && depth < maxDepth; depth++ {
		if me, ok, isNil := asMySQLError(err); ok && !isNil {
			return me.Number, true
		}
		switch x := err.(type) {
		case interface{ Unwrap() error }:
			err = x.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				if n, ok := errorNumber(e, depth+1); ok {
					return n, true
				}
			}
			return 0, false
		default:
			return 0, false
		}
	}
	return 0, false
}
