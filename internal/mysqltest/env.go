package mysqltest

import (
	"os"
	"testing"
)

// Environment variables read by this package.
const (
	// EnvDSN names the go-sql-driver/mysql DSN of a privileged MariaDB user.
	EnvDSN = "MYSQL_TEST_DSN"
	// EnvDSNUnprivileged names the DSN of a MariaDB user that has data
	// privileges on database test only (no SUPER, no READ ONLY ADMIN).
	EnvDSNUnprivileged = "MYSQL_TEST_DSN_UNPRIVILEGED"
	// EnvRequireMariaDB, when set to "1", turns every MariaDB-related skip
	// into a test failure.
	EnvRequireMariaDB = "SQLPOOL_REQUIRE_MARIADB"
)

// DSN returns MYSQL_TEST_DSN when it is set (MariaDB in CI), and otherwise the
// DSN of the shared embedded server (see EmbeddedDSN).
func DSN(tb testing.TB) string {
	tb.Helper()
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	return EmbeddedDSN(tb)
}

// IsMariaDB reports whether MYSQL_TEST_DSN is set, that is whether DSN names a
// real MariaDB server rather than the embedded one.
func IsMariaDB() bool {
	return os.Getenv(EnvDSN) != ""
}

// MariaDBRequired reports whether SQLPOOL_REQUIRE_MARIADB=1, in which case
// tests that need MariaDB fail instead of skipping when it is missing.
func MariaDBRequired() bool {
	return os.Getenv(EnvRequireMariaDB) == "1"
}

// UnprivilegedDSN returns MYSQL_TEST_DSN_UNPRIVILEGED. When that is unset it
// skips the test, or fails it when SQLPOOL_REQUIRE_MARIADB=1.
func UnprivilegedDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(EnvDSNUnprivileged)
	if dsn == "" {
		skipOrFail(tb, "%s is not set (an unprivileged MariaDB user is needed)", EnvDSNUnprivileged)
	}
	return dsn
}

// RequireMariaDB skips the test with the given reason when no MariaDB is
// configured (MYSQL_TEST_DSN unset). When SQLPOOL_REQUIRE_MARIADB=1 the skip
// becomes a tb.Fatalf naming the reason.
func RequireMariaDB(tb testing.TB, reason string) {
	tb.Helper()
	if !IsMariaDB() {
		skipOrFail(tb, "needs MariaDB (%s unset): %s", EnvDSN, reason)
	}
}

// skipOrFail skips the test with the formatted message, or fails it when
// SQLPOOL_REQUIRE_MARIADB=1.
func skipOrFail(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if MariaDBRequired() {
		tb.Fatalf(EnvRequireMariaDB+"=1: "+format, args...)
	}
	tb.Skipf(format, args...)
}
