package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/pgstore"
)

// ITDependencies, as zipkin/mysqlstore's checklist has it, in the one
// variant this store has: the spans are stored and GetDependencies links
// those of the window on the fly ("onDemand").

type depVariant struct {
	name    string
	opts    pgstore.Options
	process func(t *testing.T, h *harness, s *pgstore.Store, spans []model.Span)
}

var depVariants = []depVariant{
	{"onDemand", pgstore.Options{},
		func(t *testing.T, h *harness, s *pgstore.Store, spans []model.Span) { accept(t, s, spans...) }},
}

func link(parent, child string, calls, errs int64) model.DependencyLink {
	return model.DependencyLink{Parent: parent, Child: child, CallCount: calls, ErrorCount: errs}
}

func deps(t *testing.T, s *pgstore.Store, endTs, lookback int64) []model.DependencyLink {
	t.Helper()
	got, err := s.GetDependencies(ctxT(t), endTs, lookback)
	if err != nil {
		t.Fatalf("GetDependencies(TODAY%+dms, %d): %v", endTs-today, lookback, err)
	}
	return got
}

// depItem is one ITDependencies test, run in both variants.
func depItem(name string, run func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span))) checkItem {
	return checkItem{name: name, run: func(t *testing.T, h *harness) {
		for _, v := range depVariants {
			t.Run(v.name, func(t *testing.T) {
				h.reset(t)
				s := h.store(t, v.opts)
				run(t, h, s, func(spans ...model.Span) { v.process(t, h, s, spans) })
			})
		}
	}}
}

func sp(id model.TraceID, parent, spanID model.ID, kind model.Kind, ts, dur int64, local, remote *model.Endpoint) model.Span {
	return model.Span{TraceID: id, ParentID: parent, ID: spanID, Kind: kind, Name: "get", Timestamp: ts, Duration: dur,
		LocalEndpoint: local, RemoteEndpoint: remote}
}

var (
	frontendRemote = &model.Endpoint{ServiceName: "frontend", IPv4: frontend.IPv4, Port: 31400}
	backendRemote  = &model.Endpoint{ServiceName: "backend", IPv4: backend.IPv4, Port: 9000}
)

func init() {
	std := func(s stdTrace) []model.DependencyLink {
		return []model.DependencyLink{link("frontend", "backend", 1, 0), link("backend", "db", 1, 1)}
	}
	checklist = append(checklist, []checkItem{
		depItem("getDependencies", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			tr := newStdTrace()
			process(tr.spans()...)
			assertLinks(t, "GetDependencies", deps(t, s, tr.endTs(), day), std(tr)...)
		}),
		depItem("getDependencies_linksMixedTraceId", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			id := randomTraceID()
			ts := micros(today) + 100_000
			client := sp(id, 0, 1, model.KindClient, ts, 300_000, frontend, backend)
			server := sp(model.TraceID{Low: id.Low}, 0, 1, model.KindServer, ts+10_000, 200_000, backend, nil)
			server.Shared = true
			process(client, server)
			assertLinks(t, "GetDependencies", deps(t, s, today+day, day), link("frontend", "backend", 1, 0))
		}),
		depItem("replayOverwrites", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			tr := newStdTrace()
			process(tr.spans()...)
			process(tr.spans()...)
			assertLinks(t, "GetDependencies", deps(t, s, tr.endTs(), day), std(tr)...)
		}),
		depItem("empty", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			assertLinks(t, "GetDependencies", deps(t, s, today+day, day))
		}),
		depItem("getDependenciesAllInstrumented", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			id := randomTraceID()
			ts := micros(today) + 100_000
			root := sp(id, 0, 1, model.KindServer, ts, 400_000, frontend, nil)
			c1 := sp(id, 1, 2, model.KindClient, ts+10_000, 300_000, frontend, backendRemote)
			s1 := sp(id, 1, 2, model.KindServer, ts+20_000, 280_000, backend, frontendRemote)
			s1.Shared = true
			c2 := sp(id, 2, 3, model.KindClient, ts+30_000, 200_000, backend, dbEP)
			s2 := sp(id, 2, 3, model.KindServer, ts+40_000, 100_000, dbEP, backendRemote)
			s2.Shared = true
			process(root, c1, s1, c2, s2)
			assertLinks(t, "GetDependencies", deps(t, s, today+day, day), link("frontend", "backend", 1, 0), link("backend", "db", 1, 0))
		}),
		depItem("dependencies_loopback", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			id := randomTraceID()
			ts := micros(today) + 100_000
			root := sp(id, 0, 1, model.KindServer, ts, 400_000, frontend, nil)
			c := sp(id, 1, 2, model.KindClient, ts+10_000, 300_000, frontend, frontendRemote)
			sv := sp(id, 1, 2, model.KindServer, ts+20_000, 200_000, frontend, frontendRemote)
			sv.Shared = true
			process(root, c, sv)
			assertLinks(t, "GetDependencies", deps(t, s, today+day, day), link("frontend", "frontend", 1, 0))
		}),
		depItem("dependencies_headlessTrace", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			tr := newStdTrace()
			process(tr.client, tr.server, tr.dbCall)
			assertLinks(t, "GetDependencies", deps(t, s, tr.endTs(), day), std(tr)...)
		}),
		depItem("looksBackIndefinitely", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			tr := newStdTrace()
			process(tr.spans()...)
			assertLinks(t, "GetDependencies", deps(t, s, tr.endTs(), day), std(tr)...)
		}),
		depItem("endTsInsideTheTrace", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			tr := newStdTrace()
			process(tr.spans()...)
			assertLinks(t, "GetDependencies", deps(t, s, tr.start/1000+100, 200), std(tr)...)
		}),
		depItem("endTimeBeforeData", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			tr := newStdTrace()
			process(tr.spans()...)
			assertLinks(t, "GetDependencies", deps(t, s, today-1, day))
		}),
		depItem("lookbackAfterData", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			tr := newStdTrace()
			process(tr.spans()...)
			assertLinks(t, "GetDependencies", deps(t, s, today+2*day, day))
		}),
		depItem("notInstrumentedClientAndServer", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			tr := newStdTrace()
			tr.root.RemoteEndpoint = kafka
			process(tr.spans()...)
			assertLinks(t, "GetDependencies", deps(t, s, tr.endTs(), day),
				link("kafka", "frontend", 1, 0), link("frontend", "backend", 1, 0), link("backend", "db", 1, 1))
		}),
		{name: "endTsAndLookbackMustBePositive", run: func(t *testing.T, h *harness) {
			s := h.store(t, pgstore.Options{})
			for _, c := range []struct {
				endTs, lookback int64
				msg             string
			}{{0, day, "endTs <= 0"}, {-1, day, "endTs <= 0"}, {today, 0, "lookback <= 0"}, {today, -1, "lookback <= 0"}} {
				_, err := s.GetDependencies(ctxT(t), c.endTs, c.lookback)
				if !model.IsQueryError(err) || err.Error() != c.msg {
					t.Errorf("GetDependencies(%d, %d) error = %v, want QueryError %q", c.endTs, c.lookback, err, c.msg)
				}
			}
		}},
		depItem("instrumentedClientAndServer", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			id := randomTraceID()
			ts := micros(today) + 100_000
			c := sp(id, 0, 1, model.KindClient, ts, 300_000, frontend, backendRemote)
			sv := sp(id, 0, 1, model.KindServer, ts+10_000, 200_000, backend, frontendRemote)
			sv.Shared = true
			process(c, sv)
			assertLinks(t, "GetDependencies", deps(t, s, today+day, day), link("frontend", "backend", 1, 0))
		}),
		depItem("instrumentedProducerAndConsumer", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			id := randomTraceID()
			ts := micros(today) + 100_000
			p := sp(id, 0, 1, model.KindProducer, ts, 0, frontend, kafka)
			c := sp(id, 1, 2, model.KindConsumer, ts+100_000, 0, backend, kafka)
			process(p, c)
			assertLinks(t, "GetDependencies", deps(t, s, today+day, day), link("frontend", "kafka", 1, 0), link("kafka", "backend", 1, 0))
		}),
		depItem("missingIntermediateSpan", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			tr := newStdTrace()
			// frontend's call (span 2, both sides) is missing: backend's db
			// call still links, and the link to backend is backfilled.
			process(tr.root, tr.dbCall)
			assertLinks(t, "GetDependencies", deps(t, s, tr.endTs(), day), link("frontend", "backend", 1, 0), link("backend", "db", 1, 1))
		}),
		depItem("canSearchForIntervalsBesidesToday", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			now, yesterday := newStdTrace(), newStdTrace()
			for _, sp := range []*model.Span{&yesterday.root, &yesterday.client, &yesterday.server, &yesterday.dbCall} {
				sp.Timestamp -= micros(day)
			}
			process(append(yesterday.spans(), now.spans()...)...)
			assertLinks(t, "GetDependencies(yesterday)", deps(t, s, now.endTs()-day, 3_600_000), std(yesterday)...)
			assertLinks(t, "GetDependencies(today)", deps(t, s, now.endTs(), 400), std(now)...)
			assertLinks(t, "GetDependencies(both days)", deps(t, s, now.endTs(), 2*day),
				link("frontend", "backend", 2, 0), link("backend", "db", 2, 2))
		}),
		depItem("spanKindIsNotRequiredWhenEndpointsArePresent", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			id := randomTraceID()
			ts := micros(today) + 100_000
			a := sp(id, 0, 1, model.KindUnset, ts, 300_000, frontend, backend)
			b := sp(id, 1, 2, model.KindUnset, ts+10_000, 200_000, backend, dbEP)
			process(a, b)
			assertLinks(t, "GetDependencies", deps(t, s, today+day, day), link("frontend", "backend", 1, 0), link("backend", "db", 1, 0))
		}),
		depItem("unnamedEndpointsAreSkipped", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			id := randomTraceID()
			ts := micros(today) + 100_000
			unnamed := &model.Endpoint{IPv4: mustAddr("172.17.0.4")}
			root := sp(id, 0, 1, model.KindServer, ts, 350_000, unnamed, nil)
			c := sp(id, 1, 2, model.KindClient, ts+50_000, 250_000, unnamed, nil)
			sv := sp(id, 1, 2, model.KindServer, ts+100_000, 50_000, backend, nil)
			sv.Shared = true
			process(root, c, sv)
			assertLinks(t, "GetDependencies", deps(t, s, today+day, day))
		}),
		depItem("intermediateSpans", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			id := randomTraceID()
			ts := micros(today) + 100_000
			root := sp(id, 0, 1, model.KindServer, ts, 900_000, frontend, nil)
			local1 := sp(id, 1, 2, model.KindUnset, ts+10_000, 800_000, frontend, nil)
			c := sp(id, 2, 3, model.KindClient, ts+20_000, 700_000, frontend, backend)
			sv := sp(id, 2, 3, model.KindServer, ts+30_000, 600_000, backend, frontendRemote)
			sv.Shared = true
			local2 := sp(id, 3, 4, model.KindUnset, ts+40_000, 500_000, backend, nil)
			dbc := sp(id, 4, 5, model.KindClient, ts+50_000, 400_000, backend, dbEP)
			process(root, local1, c, sv, local2, dbc)
			assertLinks(t, "GetDependencies", deps(t, s, today+day, day), link("frontend", "backend", 1, 0), link("backend", "db", 1, 0))
		}),
		depItem("duplicateAddress", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			// Finagle labels both sides of the socket alike: the server's
			// client address (ca) names the server itself.
			id := randomTraceID()
			ts := micros(today) + 100_000
			root := sp(id, 0, 1, model.KindServer, ts, 400_000, frontend, nil)
			c := sp(id, 1, 2, model.KindClient, ts+10_000, 300_000, frontend, backend)
			sv := sp(id, 1, 2, model.KindServer, ts+20_000, 200_000, backend, backendRemote)
			sv.Shared = true
			process(root, c, sv)
			assertLinks(t, "GetDependencies", deps(t, s, today+day, day), link("frontend", "backend", 1, 0))
		}),
		depItem("oneway", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			id := randomTraceID()
			ts := micros(today) + 100_000
			c := sp(id, 0, 1, model.KindClient, ts, 0, frontend, backend)
			sv := sp(id, 0, 1, model.KindServer, ts+10_000, 0, backend, frontendRemote)
			sv.Shared = true
			process(c, sv)
			assertLinks(t, "GetDependencies", deps(t, s, today+day, day), link("frontend", "backend", 1, 0))
		}),
		depItem("oneway_noClient", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			id := randomTraceID()
			ts := micros(today) + 100_000
			sv := sp(id, 0, 1, model.KindServer, ts, 0, backend, kafka)
			process(sv)
			assertLinks(t, "GetDependencies", deps(t, s, today+day, day), link("kafka", "backend", 1, 0))
		}),
		depItem("annotationNamedErrorIsntError", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			tr := newStdTrace()
			tr.dbCall.Tags = nil
			tr.dbCall.Annotations = []model.Annotation{{Timestamp: tr.dbCall.Timestamp + 10, Value: "error"}}
			process(tr.spans()...)
			assertLinks(t, "GetDependencies", deps(t, s, tr.endTs(), day), link("frontend", "backend", 1, 0), link("backend", "db", 1, 0))
		}),

		// ITDependenciesHeavy
		depItem("manyLinks", func(t *testing.T, h *harness, s *pgstore.Store, process func(...model.Span)) {
			n := 256
			var spans []model.Span
			var want []model.DependencyLink
			for i := 0; i < n; i++ {
				id := randomTraceID()
				ts := micros(today) + int64(i+1)*1000
				caller := fmt.Sprintf("caller%03d", i)
				callee := fmt.Sprintf("callee%03d", i)
				spans = append(spans,
					sp(id, 0, 1, model.KindServer, ts, 500, frontend, epName(caller)),
					sp(id, 1, 2, model.KindClient, ts+10, 100, frontend, epName(callee)))
				want = append(want, link(caller, "frontend", 1, 0), link("frontend", callee, 1, 0))
			}
			process(spans...)
			got := deps(t, s, today+day, day)
			if len(got) != 2*n {
				t.Errorf("GetDependencies = %d links, want %d", len(got), 2*n)
			}
			assertLinks(t, "GetDependencies", got, want...)
		}),
	}...)
}
