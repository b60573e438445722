package storagetest

import (
	"cmp"
	"fmt"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// The checks of ITServiceAndSpanNames, ITAutocompleteTags,
// ITStrictTraceIdFalse, ITSearchEnabledFalse and ITSpanStoreHeavy.
var nameChecks = []check{
	// ITServiceAndSpanNames
	{name: "getLocalServiceNames_includesLocalServiceName", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		AssertStrings(t, "GetServiceNames (empty)", names(t, "GetServiceNames", func() ([]string, error) { return s.GetServiceNames(Ctx(t)) }))
		Accept(t, s, ClientSpan(RandomTraceID(), Micros(Today)+1000))
		AssertStrings(t, "GetServiceNames", names(t, "GetServiceNames", func() ([]string, error) { return s.GetServiceNames(Ctx(t)) }), "frontend")
	}},
	{name: "getLocalServiceNames_noServiceName", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		Accept(t, s, model.Span{TraceID: RandomTraceID(), ID: 1, Name: "get", Timestamp: Micros(Today) + 1000, Duration: 10})
		AssertStrings(t, "GetServiceNames", names(t, "GetServiceNames", func() ([]string, error) { return s.GetServiceNames(Ctx(t)) }))
	}},
	{name: "getRemoteServiceNames", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		get := func(Svc string) []string {
			return names(t, "GetRemoteServiceNames", func() ([]string, error) { return s.GetRemoteServiceNames(Ctx(t), Svc) })
		}
		AssertStrings(t, "GetRemoteServiceNames(frontend) empty store", get("frontend"))
		Accept(t, s, ClientSpan(RandomTraceID(), Micros(Today)+1000))
		AssertStrings(t, "GetRemoteServiceNames(wrong)", get("wrong"))
		AssertStrings(t, "GetRemoteServiceNames(\"\")", get(""))
		AssertStrings(t, "GetRemoteServiceNames(frontend)", get("frontend"), "backend")
	}},
	{name: "getRemoteServiceNames_allReturned", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		var spans []model.Span
		var want []string
		for i := 0; i < 51; i++ {
			sp := ClientSpan(RandomTraceID(), Micros(Today)+int64(i+1)*1000)
			sp.RemoteEndpoint = EpName(fmt.Sprintf("remote%02d", i))
			spans, want = append(spans, sp), append(want, sp.RemoteEndpoint.ServiceName)
		}
		Accept(t, s, spans...)
		AssertStrings(t, "GetRemoteServiceNames(frontend)", names(t, "GetRemoteServiceNames", func() ([]string, error) {
			return s.GetRemoteServiceNames(Ctx(t), "frontend")
		}), want...)
	}},
	{name: "getRemoteServiceNames_dedupes", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		var spans []model.Span
		for i := 0; i < 51; i++ {
			spans = append(spans, ClientSpan(RandomTraceID(), Micros(Today)+int64(i+1)*1000))
		}
		Accept(t, s, spans...)
		AssertStrings(t, "GetRemoteServiceNames(frontend)", names(t, "GetRemoteServiceNames", func() ([]string, error) {
			return s.GetRemoteServiceNames(Ctx(t), "frontend")
		}), "backend")
	}},
	{name: "getRemoteServiceNames_noRemoteServiceName", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		sp := ClientSpan(RandomTraceID(), Micros(Today)+1000)
		sp.RemoteEndpoint = nil
		Accept(t, s, sp)
		AssertStrings(t, "GetRemoteServiceNames(frontend)", names(t, "GetRemoteServiceNames", func() ([]string, error) {
			return s.GetRemoteServiceNames(Ctx(t), "frontend")
		}))
	}},
	{name: "getRemoteServiceNames_serviceNameGoesLowercase", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		Accept(t, s, ClientSpan(RandomTraceID(), Micros(Today)+1000))
		AssertStrings(t, "GetRemoteServiceNames(FrOnTeNd)", names(t, "GetRemoteServiceNames", func() ([]string, error) {
			return s.GetRemoteServiceNames(Ctx(t), "FrOnTeNd")
		}), "backend")
	}},
	{name: "getSpanNames_doesNotMapNameToRemoteServiceName", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		Accept(t, s, ClientSpan(RandomTraceID(), Micros(Today)+1000))
		AssertStrings(t, "GetSpanNames(Backend)", names(t, "GetSpanNames", func() ([]string, error) {
			return s.GetSpanNames(Ctx(t), "backend")
		}))
	}},
	{name: "getSpanNames", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		Accept(t, s, ClientSpan(RandomTraceID(), Micros(Today)+1000))
		AssertStrings(t, "GetSpanNames(wrong)", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(Ctx(t), "wrong") }))
		AssertStrings(t, "GetSpanNames(Frontend)", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(Ctx(t), "frontend") }), "get")
	}},
	{name: "getSpanNames_allReturned", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		var spans []model.Span
		var want []string
		for i := 0; i < 51; i++ {
			sp := ClientSpan(RandomTraceID(), Micros(Today)+int64(i+1)*1000)
			sp.Name = fmt.Sprintf("name%02d", i)
			spans, want = append(spans, sp), append(want, sp.Name)
		}
		Accept(t, s, spans...)
		AssertStrings(t, "GetSpanNames(Frontend)", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(Ctx(t), "frontend") }), want...)
	}},
	{name: "getSpanNames_dedupes", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		var spans []model.Span
		for i := 0; i < 51; i++ {
			spans = append(spans, ClientSpan(RandomTraceID(), Micros(Today)+int64(i+1)*1000))
		}
		Accept(t, s, spans...)
		AssertStrings(t, "GetSpanNames(Frontend)", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(Ctx(t), "frontend") }), "get")
	}},
	{name: "getSpanNames_noSpanName", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		sp := ClientSpan(RandomTraceID(), Micros(Today)+1000)
		sp.Name = ""
		Accept(t, s, sp)
		AssertStrings(t, "GetSpanNames(Frontend)", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(Ctx(t), "frontend") }))
	}},
	{name: "getSpanNames_serviceNameGoesLowercase", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		Accept(t, s, ClientSpan(RandomTraceID(), Micros(Today)+1000))
		AssertStrings(t, "GetSpanNames(FrOnTeNd)", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(Ctx(t), "FrOnTeNd") }), "get")
	}},

	// ITAutocompleteTags (autocompleteKeys = [http.host])
	{name: "ignores_when_key_not_in_autocompleteTags", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{AutocompleteKeys: []string{"http.host"}})
		sp := ClientSpan(RandomTraceID(), Micros(Today)+1000)
		sp.Tags = map[string]string{"http.method": "GET"}
		Accept(t, s, sp)
		keys := names(t, "GetKeys", func() ([]string, error) { return s.GetKeys(Ctx(t)) })
		AssertStrings(t, "GetKeys", keys, "http.host")
		AssertStrings(t, "GetValues(http.method)", names(t, "GetValues", func() ([]string, error) { return s.GetValues(Ctx(t), "http.method") }))
	}},
	{name: "getTagsAndValues", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{AutocompleteKeys: []string{"http.host"}})
		a := ClientSpan(RandomTraceID(), Micros(Today)+1000)
		a.Tags = map[string]string{"http.host": "host1", "http.method": "GET"}
		b := ClientSpan(RandomTraceID(), Micros(Today)+2000)
		b.Tags = map[string]string{"http.host": "host1"}
		Accept(t, s, a, b)
		AssertStrings(t, "GetKeys", names(t, "GetKeys", func() ([]string, error) { return s.GetKeys(Ctx(t)) }), "http.host")
		AssertStrings(t, "GetValues(http.host)", names(t, "GetValues", func() ([]string, error) { return s.GetValues(Ctx(t), "http.host") }), "host1")
		if _, err := s.GetValues(Ctx(t), ""); !model.IsQueryError(err) || err.Error() != "key was empty" {
			t.Errorf("GetValues(\"\") error = %v, want QueryError \"key was empty\"", err)
		}
	}},

	// ITStrictTraceIdFalse
	{name: "strictTraceIdFalse/getTraces_128BitTraceId_mixed", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{DisableStrictTraceID: true})
		tr := NewStdTrace()
		tr.Root.Tags = map[string]string{"foo": "bar"}
		// Backend reports the trace with 64-bit IDs.
		low := model.TraceID{Low: tr.ID.Low}
		tr.Server.TraceID, tr.DBCall.TraceID = low, low
		Accept(t, s, tr.Spans()...)
		AssertGetTraces(t, s, Request(Svc("frontend"), AnnotationQuery("foo")), tr.Spans())
		AssertGetTraces(t, s, Request(Svc("backend"), AnnotationQuery("error")), tr.Spans())
	}},
	{name: "strictTraceIdFalse/getTrace_retrievesBy64Or128BitTraceId_mixed", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{DisableStrictTraceID: true})
		tr := NewStdTrace()
		low := model.TraceID{Low: tr.ID.Low}
		tr.Server.TraceID, tr.DBCall.TraceID = low, low
		Accept(t, s, tr.Spans()...)
		AssertTrace(t, s, tr.ID, tr.Spans())
		AssertTrace(t, s, low, tr.Spans())
	}},
	{name: "strictTraceIdFalse/getTraces_retrievesBy64Or128BitTraceId", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{DisableStrictTraceID: true})
		a, b := NewStdTrace(), NewStdTrace()
		Accept(t, s, append(a.Spans(), b.Spans()...)...)
		for _, ids := range [][]model.TraceID{
			{a.ID, b.ID}, {{Low: a.ID.Low}, {Low: b.ID.Low}}, {a.ID, {Low: b.ID.Low}}, {{Low: a.ID.Low}, b.ID},
		} {
			got, err := s.GetTracesByIDs(Ctx(t), ids)
			if err != nil {
				t.Fatal(err)
			}
			AssertTraces(t, fmt.Sprintf("GetTracesByIDs(%s, %s)", ids[0], ids[1]), got, a.Spans(), b.Spans())
		}
	}},

	// ITSearchEnabledFalse
	{name: "searchEnabledFalse/getTraces_and_names_return_empty", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{DisableSearch: true, AutocompleteKeys: []string{"http.path"}})
		tr := NewStdTrace()
		Accept(t, s, tr.Spans()...)
		for _, q := range []model.QueryRequest{
			Request(), Request(Svc("frontend")), Request(Svc("frontend"), Remote("backend")),
			Request(SpanName("get")), Request(AnnotationQuery("foo")), Request(Durations(1, 0)),
		} {
			AssertGetTraces(t, s, q)
		}
		AssertStrings(t, "GetServiceNames", names(t, "GetServiceNames", func() ([]string, error) { return s.GetServiceNames(Ctx(t)) }))
		AssertStrings(t, "GetRemoteServiceNames", names(t, "GetRemoteServiceNames", func() ([]string, error) { return s.GetRemoteServiceNames(Ctx(t), "frontend") }))
		AssertStrings(t, "GetSpanNames", names(t, "GetSpanNames", func() ([]string, error) { return s.GetSpanNames(Ctx(t), "frontend") }))
		AssertStrings(t, "GetKeys", names(t, "GetKeys", func() ([]string, error) { return s.GetKeys(Ctx(t)) }))
		AssertStrings(t, "GetValues", names(t, "GetValues", func() ([]string, error) { return s.GetValues(Ctx(t), "http.path") }))
		AssertTrace(t, s, tr.ID, tr.Spans()) // trace by ID still works
	}},

	// ITSpanStoreHeavy
	{name: "traceWithManySpans", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		id := RandomTraceID()
		ts := Micros(Today) + 1000
		spans := []model.Span{{TraceID: id, ID: 1, Kind: model.KindServer, Name: "root", Timestamp: ts, Duration: 1000_000, LocalEndpoint: Frontend}}
		for i := 2; i <= 101; i++ {
			spans = append(spans, model.Span{TraceID: id, ParentID: 1, ID: model.ID(i), Name: fmt.Sprintf("child%d", i),
				Timestamp: ts + int64(i), Duration: 10, LocalEndpoint: Frontend})
		}
		Accept(t, s, spans...)
		AssertGetTraces(t, s, Request(), spans)
		AssertTrace(t, s, id, spans)
	}},
	{name: "getTraces_manyTraces", run: func(t *testing.T, h *Harness) {
		s := h.open(t, Options{})
		n := cmp.Or(h.ManyTraces, 1000)
		var spans []model.Span
		var traces [][]model.Span
		for i := 0; i < n; i++ {
			sp := ClientSpan(RandomTraceID(), Micros(Today)+int64(i+1)*1000)
			sp.Tags = map[string]string{"http.method": "GET"}
			spans, traces = append(spans, sp), append(traces, one(sp))
		}
		Accept(t, s, spans...)
		for _, q := range []model.QueryRequest{
			Request(Limit(n)), Request(Limit(n), Svc("frontend")), Request(Limit(n), Svc("frontend"), Remote("backend")),
			Request(Limit(n), Svc("frontend"), SpanName("get")), Request(Limit(n), Svc("frontend"), AnnotationQuery("http.method=GET")),
		} {
			got := GetTraces(t, s, q)
			if len(got) != n {
				t.Errorf("GetTraces(%s) = %d traces, want %d", Describe(q), len(got), n)
			}
		}
		AssertGetTraces(t, s, Request(Limit(n)), traces...)
	}},
}
