package uitest

import (
	"os"
	"strings"
	"testing"
)

// ShowTrace opens the trace page of traceID at baseURL in headless Chromium, waits until its
// waterfall is drawn, and returns each row's text (service, span name, duration) in drawing
// order. When file is not empty it also writes a 1360×900 PNG of the page there. It skips the
// test when no Chromium is found, or fails it under SQLPOOL_REQUIRE_CHROMIUM=1.
func ShowTrace(t *testing.T, baseURL, traceID, file string) []string {
	t.Helper()
	exe, err := ChromiumPath()
	if err != nil {
		if os.Getenv("SQLPOOL_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("the trace page needs Chromium and SQLPOOL_REQUIRE_CHROMIUM=1: %v", err)
		}
		t.Skipf("skipping the trace page: %v (set SQLPOOL_REQUIRE_CHROMIUM=1 to make this a failure)", err)
	}
	c := &checker{t: t, base: strings.TrimRight(baseURL, "/")}
	c.startBrowser(exe)
	c.navigate("/zipkin/traces/"+traceID, traceRendered)
	rows := eval[[]string](c, `[...document.querySelectorAll('#waterfall > .row')].map(r => r.textContent.replace(/\s+/g, ' ').trim())`)
	c.expectClean("trace")
	if file != "" {
		c.screenshotTo(file)
	}
	return rows
}
