package ui_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sqlpool/sqlpool/app/internal/uitest"
	"github.com/sqlpool/sqlpool/app/zipkin/ui"
)

// TestBrowser runs the viewer in headless Chromium against a fake /api/v2
// (uitest.FakeAPI, which answers as Zipkin's MySQL store does) laid out as
// the Zipkin server lays it out: the viewer at /zipkin/, the API at
// /api/v2/, / redirecting to /zipkin/. It writes no files: the screenshots
// in docs/img come from the real server and database, written by
// cmd/zipkin-mysql's TestViewerOnServer with -update.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: Chromium browser test")
	}
	fake := uitest.NewFakeAPI()
	mux := http.NewServeMux()
	mux.Handle("/zipkin/", ui.Handler())
	mux.Handle("/api/v2/", fake)
	mux.Handle("/{$}", http.RedirectHandler("/zipkin/", http.StatusFound))
	srv := httptest.NewServer(mux) // 127.0.0.1
	defer srv.Close()

	uitest.RunBrowserChecks(t, srv.URL, func(spans []byte) {
		if err := fake.Post(spans); err != nil {
			t.Fatal(err)
		}
	})
}
