package ui_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/sqlpool/sqlpool/app/zipkin/ui"
)

// Serve the viewer next to a Zipkin API: /zipkin/ for the pages, / redirecting
// to them. Here the pages are pointed at another Zipkin-compatible server.
func ExampleHandler() {
	viewer, err := ui.New(ui.Options{APIBase: "http://zipkin.example:9411/api/v2"})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/zipkin/", viewer)
	mux.Handle("/{$}", http.RedirectHandler("/zipkin/", http.StatusFound))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/zipkin/config.json", nil))
	body, _ := io.ReadAll(rec.Body)
	fmt.Println(string(body))
	// Output: {"apiBase":"http://zipkin.example:9411/api/v2"}
}
