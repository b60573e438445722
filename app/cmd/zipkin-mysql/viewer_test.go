package main

import (
	"flag"
	"testing"

	"github.com/sqlpool/sqlpool/app/internal/uitest"
)

var updateScreenshots = flag.Bool("update", false, "write screenshots of the viewer pages, from this test's real data, into docs/img")

// TestViewerOnServer runs the viewer's browser checks (zipkin/ui/uitest)
// against the real command: the checks post their spans (the messy cases
// included) through POST /api/v2/spans, then drive headless Chromium
// through the search, trace and dependencies pages served at /zipkin/.
//
// "memory" runs the command as README does, on its default in-memory
// storage; with -update it writes docs/img/viewer-*.png from that run (the
// only writer of those files). "mariadb" runs it with -dsn and -init-schema on a fresh database
// of the MariaDB of MYSQL_TEST_DSN; it skips without one (fails under
// SQLPOOL_REQUIRE_MARIADB=1).
func TestViewerOnServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: Chromium browser test")
	}
	if _, err := uitest.ChromiumPath(); err != nil {
		uitest.RunBrowserChecks(t, "", nil) // skips, or fails under SQLPOOL_REQUIRE_CHROMIUM=1
		return
	}
	t.Run("memory", func(t *testing.T) {
		p := startBinary(t, nil, "-listen", "127.0.0.1:0")
		var opts uitest.Options
		if *updateScreenshots {
			opts.ScreenshotDir = "../../../docs/img"
		}
		uitest.RunBrowserChecksWith(t, p.url, nil, opts)
		p.stop(t)
	})
	t.Run("mariadb", func(t *testing.T) {
		dsn := freshDatabase(t)
		p := startBinary(t, nil, "-listen", "127.0.0.1:0", "-dsn", dsn, "-init-schema")
		uitest.RunBrowserChecks(t, p.url, nil)
		p.stop(t)
	})
}
