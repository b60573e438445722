module github.com/sqlpool/sqlpool/sqlmockpool

go 1.26.0

require (
	github.com/DATA-DOG/go-sqlmock v1.5.2
	github.com/sqlpool/sqlpool v0.4.1
)
