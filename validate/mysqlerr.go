package validate

import (
	"errors"
	"reflect"
	"sync/atomic"
	"unsafe"
)

// mysqlPkg is go-sql-driver's import path. This package reads *mysql.MySQLError through
// reflection instead of importing the driver, so that a program on another database (package
// pool on PostgreSQL) does not link it.
const mysqlPkg = "github.com/go-sql-driver/mysql"

// mysqlError is the part of a *mysql.MySQLError the classification reads.
type mysqlError struct {
	Number   uint16
	SQLState [5]byte
	Message  string
}

// mysqlLayout is the reflected shape of *mysql.MySQLError, found on the first one seen.
type mysqlLayout struct {
	typ                    reflect.Type // *mysql.MySQLError
	number, state, message int
}

var mysqlType atomic.Pointer[mysqlLayout]

// errorStringType is the type errors.New returns (go-sql-driver's sentinels are such values).
var errorStringType = reflect.TypeOf(errors.New(""))

// asMySQLError reports whether err is a *mysql.MySQLError (ok) and, when it is, its fields or
// that the pointer is nil. It does not allocate.
func asMySQLError(err error) (e mysqlError, ok, isNil bool) {
	t := reflect.TypeOf(err)
	l := mysqlType.Load()
	if l == nil || l.typ != t {
		if l != nil || t == errorStringType {
			return e, false, false // the driver's error type is learnt already, or this is errors.New's
		}
		if l = learnMySQLType(t); l == nil {
			return e, false, false
		}
	}
	ptr := reflect.ValueOf(err).UnsafePointer()
	if ptr == nil {
		return e, true, true
	}
	// learnMySQLType checked that the driver's struct starts with exactly mysqlError's fields.
	return *(*mysqlError)(ptr), true, false
}

// learnMySQLType returns the layout for t when t is *mysql.MySQLError with the fields this
// package reads, and nil otherwise.
func learnMySQLType(t reflect.Type) *mysqlLayout {
	if t == nil || t.Kind() != reflect.Pointer {
		return nil
	}
	el := t.Elem()
	if el.Kind() != reflect.Struct || el.Name() != "MySQLError" || el.PkgPath() != mysqlPkg {
		return nil
	}
	l := &mysqlLayout{typ: t}
	n, ok1 := el.FieldByName("Number")
	s, ok2 := el.FieldByName("SQLState")
	m, ok3 := el.FieldByName("Message")
	var my mysqlError
	if !ok1 || !ok2 || !ok3 || n.Type.Kind() != reflect.Uint16 || m.Type.Kind() != reflect.String ||
		s.Type.Kind() != reflect.Array || s.Type.Len() != 5 || s.Type.Elem().Kind() != reflect.Uint8 ||
		n.Offset != unsafe.Offsetof(my.Number) || s.Offset != unsafe.Offsetof(my.SQLState) ||
		m.Offset != unsafe.Offsetof(my.Message) || el.Size() < unsafe.Sizeof(my) {
		return nil // a driver version with another layout: not read (its errors are then not fatal by number)
	}
	mysqlType.Store(l)
	return l
}
