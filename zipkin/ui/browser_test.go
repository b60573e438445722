package ui_test

import (
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/sqlpool/sqlpool/zipkin/ui"
	"github.com/sqlpool/sqlpool/zipkin/ui/uitest"
)

var update = flag.Bool("update", false, "write screenshots of the viewer pages into docs/img")

// TestBrowser runs the viewer in headless Chromium against a fake /api/v2
// (uitest.FakeAPI) laid out as the Zipkin server lays it out: the viewer at
// /zipkin/, the API at /api/v2/, / redirecting to /zipkin/.
// With -update it writes the screenshots in docs/img.
func TestBrowser(t *testing.T) {
	fake := uitest.NewFakeAPI()
	mux := http.NewServeMux()
	mux.Handle("/zipkin/", ui.Handler())
	mux.Handle("/api/v2/", fake)
	mux.Handle("/{$}", http.RedirectHandler("/zipkin/", http.StatusFound))
	srv := httptest.NewServer(mux) // 127.0.0.1
	defer srv.Close()

	var opts uitest.Options
	if *update {
		opts.ScreenshotDir = filepath.Join("..", "..", "docs", "img")
		if err := os.MkdirAll(opts.ScreenshotDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	uitest.RunBrowserChecksWith(t, srv.URL, func(spans []byte) {
		if err := fake.Post(spans); err != nil {
			t.Fatal(err)
		}
	}, opts)
}
