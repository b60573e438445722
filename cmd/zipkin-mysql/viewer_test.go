package main

import (
	"flag"
	"testing"

	"github.com/sqlpool/sqlpool/zipkin/ui/uitest"
)

var updateScreenshots = flag.Bool("update", false, "write screenshots of the viewer pages, from this test's real data, into docs/img")

// TestViewerOnServer runs the viewer's browser checks (zipkin/ui/uitest)
// against the real command on the embedded database: the test posts its
// spans (the messy cases included) through POST /api/v2/spans, then drives
// headless Chromium through the search, trace and dependencies pages served
// at /zipkin/. With -update it writes the screenshots in docs/img.
func TestViewerOnServer(t *testing.T) {
	if _, err := uitest.ChromiumPath(); err != nil {
		uitest.RunBrowserChecks(t, "", nil) // skips, or fails under SQLPOOL_REQUIRE_CHROMIUM=1
		return
	}
	p := startBinary(t, nil, "-listen", "127.0.0.1:0")
	var opts uitest.Options
	if *updateScreenshots {
		opts.ScreenshotDir = "../../docs/img"
	}
	uitest.RunBrowserChecksWith(t, p.url, nil, opts)
	p.stop(t)
}
