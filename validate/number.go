package validate

import (
	"errors"

	"github.com/go-sql-driver/mysql"
)

// ErrorNumber returns the MySQL/MariaDB error number of the first *mysql.MySQLError in err's
// chain, and false when there is none. It lets packages that must not depend on the driver
// (package pool) react to one server error, such as 1461 (too many prepared statements).
func ErrorNumber(err error) (uint16, bool) {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number, true
	}
	return 0, false
}
