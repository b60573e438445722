package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/sqlpool/sqlpool/app/zipkin/server"
	"github.com/sqlpool/sqlpool/app/zipkin/storage"
)

// A server in front of a store: POSTs are validated and answered 202, then
// written by the writers; a bad body is a 400 with Zipkin's message. Close
// drains the queue. Here storage.Noop accepts and drops; a real program
// passes a *mysqlstore.Store and serves Handler with an http.Server.
func ExampleNew() {
	srv, err := server.New(server.Config{Storage: storage.Noop{}, StorageName: "NoopStorage"})
	if err != nil {
		fmt.Println(err)
		return
	}
	post := func(body string) {
		req := httptest.NewRequest(http.MethodPost, "/api/v2/spans", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		fmt.Println(strings.TrimSpace(fmt.Sprint(rec.Code, " ", rec.Body.String())))
	}
	post(`[{"traceId":"5af7183fb1d4cf5f","id":"6b221d5bc9e6496c","name":"get /api","localEndpoint":{"serviceName":"frontend"}}]`)
	post(`[{"traceId":"XYZ","id":"6b221d5bc9e6496c"}]`)
	if err := srv.Close(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// 202
	// 400 XYZ should be lower-hex encoded with no prefix at $[0].traceId reading List<Span> from json
}

// A collector beside the HTTP one reports its health in /health under its
// own name, as Zipkin's KafkaCollector does; one component DOWN makes the
// whole document DOWN (503).
func ExampleServer_AddHealthCheck() {
	srv, err := server.New(server.Config{Storage: storage.Noop{}, StorageName: "NoopStorage"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close(context.Background())
	brokerDown := func(ctx context.Context) error { return errors.New("kafka: no broker answered") }
	if err := srv.AddHealthCheck("KafkaCollector", brokerDown); err != nil {
		fmt.Println(err)
		return
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/health", nil))
	fmt.Println(rec.Code, rec.Body.String())
	// Output:
	// 503 {"status":"DOWN","zipkin":{"details":{"KafkaCollector":{"error":"kafka: no broker answered","status":"DOWN"},"NoopStorage":{"status":"UP"}},"status":"DOWN"}}
}
