// Package dropin has no code of its own: its tests run sqlpool where Go code really lives —
// under github.com/jmoiron/sqlx, under GORM (gorm.io/gorm with gorm.io/driver/mysql, given the
// pool's *sql.DB) and in front of github.com/DATA-DOG/go-sqlmock — and check that the pool
// changes nothing those libraries rely on and sends nothing they did not ask for. The tests
// also check, per session variable, that a borrower's SET is restored to the connection's
// baseline at release instead of costing a reconnect.
//
// The libraries are test-only requirements of the main module: no library package imports
// them (go list -deps ./pool lists go-sql-driver/mysql and the standard library only).
package dropin
