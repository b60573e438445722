package metrics

import (
	"context"
	"errors"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlpool/sqlpool/validate"
)

// errClass is the class label of sqlpool_statement_errors_total.
type errClass uint8

const (
	classFatal errClass = iota
	classDeadlock
	classLockWaitTimeout
	classDuplicate
	classConstraint
	classSyntax
	classTimeout
	classCanceled
	classDeadline
	classOther
	numClasses
)

// classNames are the label values, indexed by errClass.
var classNames = [numClasses]string{
	classFatal:           "fatal",
	classDeadlock:        "deadlock",
	classLockWaitTimeout: "lock_wait_timeout",
	classDuplicate:       "duplicate",
	classConstraint:      "constraint",
	classSyntax:          "syntax",
	classTimeout:         "timeout",
	classCanceled:        "canceled",
	classDeadline:        "deadline_exceeded",
	classOther:           "other",
}

// ErrorClass returns the class label sqlpool_statement_errors_total gives err: "fatal" (the
// connection is discarded: validate.Check), "deadlock" (1213), "lock_wait_timeout" (1205),
// "duplicate" (1062, 1586, 1022, 1169), "constraint" (foreign key 1216, 1217, 1451, 1452; NOT
// NULL 1048; CHECK 3819, 4025), "syntax" (1064, 1149), "timeout" (a server-side statement
// timeout or interrupted query: 3024, 1969, 1317), "canceled" and "deadline_exceeded" (the
// caller's ctx ended), or "other". It does not allocate.
func ErrorClass(err error) string { return classNames[classify(err)] }

func classify(err error) errClass {
	switch {
	case errors.Is(err, context.Canceled):
		return classCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return classDeadline
	case validate.Check(err, validate.Session{}).Fatal:
		return classFatal
	}
	switch n := mysqlNumber(err, 0); n {
	case 1213:
		return classDeadlock
	case 1205:
		return classLockWaitTimeout
	case 1062, 1586, 1022, 1169:
		return classDuplicate
	case 1216, 1217, 1451, 1452, 1048, 3819, 4025:
		return classConstraint
	case 1064, 1149:
		return classSyntax
	case 3024, 1969, 1317:
		return classTimeout
	}
	return classOther
}

// mysqlNumber returns the number of the first *mysql.MySQLError in err's chain, 0 if none,
// walking Unwrap() error and Unwrap() []error without allocating.
func mysqlNumber(err error, depth int) uint16 {
	for ; err != nil && depth < 64; depth++ {
		switch e := err.(type) {
		case *mysql.MySQLError:
			return e.Number
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				if n := mysqlNumber(inner, depth+1); n != 0 {
					return n
				}
			}
			return 0
		default:
			return 0
		}
	}
	return 0
}
