package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/pgstore"
)

func names(t *testing.T, what string, f func() ([]string, error)) []string {
	t.Helper()
	got, err := f()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return got
}

func init() {
	checklist = append(checklist, []checkItem{
		// ITServiceAndSpanNames
		{name: "getLocalServiceNames_includesLocalServiceName", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			assertStrings(t, "GetServiceNames (empty)", names(t, "GetServiceNames", func() ([]string, error) { return s.GetServiceNames(ctxT(t)) }))
			accept(t, s, clientSpan(randomTraceID(), micros(today)+1000))
			assertStrings(t, "GetServiceNames", names(t, "GetServiceNames", func() ([]string, error) { return s.GetServiceNames(ctxT(t)) }), "frontend")
		}},
		{name: "getLocalServiceNames_noServiceName", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			accept(t, s, model.Span{TraceID: randomTraceID(), ID: 1, Name: "get", Timestamp: micros(today) + 1000, Duration: 10})
			assertStrings(t, "GetServiceNames", names(t, "GetServiceNames", func() ([]string, error) { return s.GetServiceNames(ctxT(t)) }))
		}},
		{name: "getRemoteServiceNames", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			get := func(svc string) []string {
				return names(t, "GetRemoteServiceNames", func() ([]string, error) { return s.GetRemoteServiceNames(ctxT(t), svc) })
			}
			assertStrings(t, "GetRemoteServiceNames(frontend) empty store", get("frontend"))
			accept(t, s, clientSpan(randomTraceID(), micros(today)+1000))
			assertStrings(t, "GetRemoteServiceNames(wrong)", get("wrong"))
			assertStrings(t, "GetRemoteServiceNames(\"\")", get(""))
			assertStrings(t, "GetRemoteServiceNames(frontend)", get("frontend"), "backend")
		}},
		{name: "getRemoteServiceNames_allReturned", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			var spans []model.Span
			var want []string
			for i := 0; i < 51; i++ {
				sp := clientSpan(randomTraceID(), micros(today)+int64(i+1)*1000)
				sp.RemoteEndpoint = epName(fmt.Sprintf("remote%02d", i))
				spans, want = append(spans, sp), append(want, sp.RemoteEndpoint.ServiceName)
			}
			accept(t, s, spans...)
			assertStrings(t, "GetRemoteServiceNames(frontend)", names(t, "GetRemoteServiceNames", func() ([]string, error) {
				return s.GetRemoteServiceNames(ctxT(t), "frontend")
			}), want...)
		}},
		{name: "getRemoteServiceNames_dedupes", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			var spans []model.Span
			for i := 0; i < 51; i++ {
				spans = append(spans, clientSpan(randomTraceID(), micros(today)+int64(i+1)*1000))
			}
			accept(t, s, spans...)
			assertStrings(t, "GetRemoteServiceNames(frontend)", names(t, "GetRemoteServiceNames", func() ([]string, error) {
				return s.GetRemoteServiceNames(ctxT(t), "frontend")
			}), "backend")
		}},
		{name: "getRemoteServiceNames_noRemoteServiceName", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			sp := clientSpan(randomTraceID(), micros(today)+1000)
			sp.RemoteEndpoint = nil
			accept(t, s, sp)
			assertStrings(t, "GetRemoteServiceNames(frontend)", names(t, "GetRemoteServiceNames", func() ([]string, error) {
				return s.GetRemoteServiceNames(ctxT(t), "frontend")
			}))
		}},
		{name: "getRemoteServiceNames_serviceNameGoesLowercase", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			accept(t, s, clientSpan(randomTraceID(), micros(today)+1000))
			assertStrings(t, "GetRemoteServiceNames(FrOnTeNd)", names(t, "GetRemoteServiceNames", func() ([]string, error) {
				return s.GetRemoteServiceNames(ctxT(t), "FrOnTeNd")
			}), "backend")
		}},
		{name: "getSpanNames_doesNotMapNameToRemoteServiceName", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			accept(t, s, clientSpan(randomTraceID(), micros(today)+1000))
			assertStrings(t, "GetSpanNames(backend)", names(t, "GetSpanNames", func() ([]string, error) {
				return s.GetSpanNames(ctxT(t), "backend")
			}))
		}},
		{name: "getSpanNames", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			accept(t, s, clientSpan(randomTraceID(), micros(today)+1000))
			assertStrings(t, "GetSpanNames(wrong)", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(ctxT(t), "wrong") }))
			assertStrings(t, "GetSpanNames(frontend)", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(ctxT(t), "frontend") }), "get")
		}},
		{name: "getSpanNames_allReturned", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			var spans []model.Span
			var want []string
			for i := 0; i < 51; i++ {
				sp := clientSpan(randomTraceID(), micros(today)+int64(i+1)*1000)
				sp.Name = fmt.Sprintf("name%02d", i)
				spans, want = append(spans, sp), append(want, sp.Name)
			}
			accept(t, s, spans...)
			assertStrings(t, "GetSpanNames(frontend)", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(ctxT(t), "frontend") }), want...)
		}},
		{name: "getSpanNames_dedupes", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			var spans []model.Span
			for i := 0; i < 51; i++ {
				spans = append(spans, clientSpan(randomTraceID(), micros(today)+int64(i+1)*1000))
			}
			accept(t, s, spans...)
			assertStrings(t, "GetSpanNames(frontend)", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(ctxT(t), "frontend") }), "get")
		}},
		{name: "getSpanNames_noSpanName", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			sp := clientSpan(randomTraceID(), micros(today)+1000)
			sp.Name = ""
			accept(t, s, sp)
			assertStrings(t, "GetSpanNames(frontend)", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(ctxT(t), "frontend") }))
		}},
		{name: "getSpanNames_serviceNameGoesLowercase", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			accept(t, s, clientSpan(randomTraceID(), micros(today)+1000))
			assertStrings(t, "GetSpanNames(FrOnTeNd)", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(ctxT(t), "FrOnTeNd") }), "get")
		}},

		// ITAutocompleteTags (autocompleteKeys = [http.host])
		{name: "ignores_when_key_not_in_autocompleteTags", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{AutocompleteKeys: []string{"http.host"}})
			sp := clientSpan(randomTraceID(), micros(today)+1000)
			sp.Tags = map[string]string{"http.method": "GET"}
			accept(t, s, sp)
			keys := names(t, "GetKeys", func() ([]string, error) { return s.GetKeys(ctxT(t)) })
			assertStrings(t, "GetKeys", keys, "http.host")
			assertStrings(t, "GetValues(http.method)", names(t, "GetValues", func() ([]string, error) { return s.GetValues(ctxT(t), "http.method") }))
		}},
		{name: "getTagsAndValues", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{AutocompleteKeys: []string{"http.host"}})
			a := clientSpan(randomTraceID(), micros(today)+1000)
			a.Tags = map[string]string{"http.host": "host1", "http.method": "GET"}
			b := clientSpan(randomTraceID(), micros(today)+2000)
			b.Tags = map[string]string{"http.host": "host1"}
			accept(t, s, a, b)
			assertStrings(t, "GetKeys", names(t, "GetKeys", func() ([]string, error) { return s.GetKeys(ctxT(t)) }), "http.host")
			assertStrings(t, "GetValues(http.host)", names(t, "GetValues", func() ([]string, error) { return s.GetValues(ctxT(t), "http.host") }), "host1")
			if _, err := s.GetValues(ctxT(t), ""); !model.IsQueryError(err) || err.Error() != "key was empty" {
				t.Errorf("GetValues(\"\") error = %v, want QueryError \"key was empty\"", err)
			}
		}},

		// ITStrictTraceIdFalse
		{name: "strictTraceIdFalse/getTraces_128BitTraceId_mixed", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{DisableStrictTraceID: true})
			tr := newStdTrace()
			tr.root.Tags = map[string]string{"foo": "bar"}
			// backend reports the trace with 64-bit IDs.
			low := model.TraceID{Low: tr.id.Low}
			tr.server.TraceID, tr.dbCall.TraceID = low, low
			accept(t, s, tr.spans()...)
			assertGetTraces(t, s, request(svc("frontend"), annotationQuery("foo")), tr.spans())
			assertGetTraces(t, s, request(svc("backend"), annotationQuery("error")), tr.spans())
		}},
		{name: "strictTraceIdFalse/getTrace_retrievesBy64Or128BitTraceId_mixed", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{DisableStrictTraceID: true})
			tr := newStdTrace()
			low := model.TraceID{Low: tr.id.Low}
			tr.server.TraceID, tr.dbCall.TraceID = low, low
			accept(t, s, tr.spans()...)
			assertTrace(t, s, tr.id, tr.spans())
			assertTrace(t, s, low, tr.spans())
		}},
		{name: "strictTraceIdFalse/getTraces_retrievesBy64Or128BitTraceId", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{DisableStrictTraceID: true})
			a, b := newStdTrace(), newStdTrace()
			accept(t, s, append(a.spans(), b.spans()...)...)
			for _, ids := range [][]model.TraceID{
				{a.id, b.id}, {{Low: a.id.Low}, {Low: b.id.Low}}, {a.id, {Low: b.id.Low}}, {{Low: a.id.Low}, b.id},
			} {
				got, err := s.GetTracesByIDs(ctxT(t), ids)
				if err != nil {
					t.Fatal(err)
				}
				assertTraces(t, fmt.Sprintf("GetTracesByIDs(%s, %s)", ids[0], ids[1]), got, a.spans(), b.spans())
			}
		}},

		// ITSearchEnabledFalse
		{name: "searchEnabledFalse/getTraces_and_names_return_empty", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{DisableSearch: true, AutocompleteKeys: []string{"http.path"}})
			tr := newStdTrace()
			accept(t, s, tr.spans()...)
			for _, q := range []model.QueryRequest{
				request(), request(svc("frontend")), request(svc("frontend"), remote("backend")),
				request(spanName("get")), request(annotationQuery("foo")), request(durations(1, 0)),
			} {
				assertGetTraces(t, s, q)
			}
			assertStrings(t, "GetServiceNames", names(t, "GetServiceNames", func() ([]string, error) { return s.GetServiceNames(ctxT(t)) }))
			assertStrings(t, "GetRemoteServiceNames", names(t, "GetRemoteServiceNames", func() ([]string, error) { return s.GetRemoteServiceNames(ctxT(t), "frontend") }))
			assertStrings(t, "GetSpanNames", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(ctxT(t), "frontend") }))
			assertStrings(t, "GetKeys", names(t, "GetKeys", func() ([]string, error) { return s.GetKeys(ctxT(t)) }))
			assertStrings(t, "GetValues", names(t, "GetValues", func() ([]string, error) { return s.GetValues(ctxT(t), "http.path") }))
			assertTrace(t, s, tr.id, tr.spans()) // trace by ID still works
		}},

		// ITSpanStoreHeavy
		{name: "traceWithManySpans", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			id := randomTraceID()
			ts := micros(today) + 1000
			spans := []model.Span{{TraceID: id, ID: 1, Kind: model.KindServer, Name: "root", Timestamp: ts, Duration: 1000_000, LocalEndpoint: frontend}}
			for i := 2; i <= 101; i++ {
				spans = append(spans, model.Span{TraceID: id, ParentID: 1, ID: model.ID(i), Name: fmt.Sprintf("child%d", i),
					Timestamp: ts + int64(i), Duration: 10, LocalEndpoint: frontend})
			}
			accept(t, s, spans...)
			assertGetTraces(t, s, request(), spans)
			assertTrace(t, s, id, spans)
		}},
		{name: "getTraces_manyTraces", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			n := 1000
			if h.srv.name == "embedded" {
				// go-mysql-server's in-memory tables slow down as they grow: 1,000 traces
				// took 34 s alone (about 5 min under -race on a loaded machine). MariaDB
				// runs Zipkin's 1,000; the embedded server checks the same promise (limit
				// counts traces, no hidden cap at the default 100) on 150.
				n = 150
			}
			var spans []model.Span
			var traces [][]model.Span
			for i := 0; i < n; i++ {
				sp := clientSpan(randomTraceID(), micros(today)+int64(i+1)*1000)
				sp.Tags = map[string]string{"http.method": "GET"}
				spans, traces = append(spans, sp), append(traces, one(sp))
			}
			accept(t, s, spans...)
			for _, q := range []model.QueryRequest{
				request(limit(n)), request(limit(n), svc("frontend")), request(limit(n), svc("frontend"), remote("backend")),
				request(limit(n), svc("frontend"), spanName("get")), request(limit(n), svc("frontend"), annotationQuery("http.method=GET")),
			} {
				got := getTraces(t, s, q)
				if len(got) != n {
					t.Errorf("GetTraces(%s) = %d traces, want %d", describe(q), len(got), n)
				}
			}
			assertGetTraces(t, s, request(limit(n)), traces...)
		}},
	}...)
}
