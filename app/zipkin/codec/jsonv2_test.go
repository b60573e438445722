package codec

import (
	"encoding/json"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

func mustDecodeV2(t *testing.T, body string) []model.Span {
	t.Helper()
	spans, err := DecodeJSONV2([]byte(body))
	if err != nil {
		t.Fatalf("DecodeJSONV2(%s): %v", body, err)
	}
	return spans
}

func TestJSONV2RoundTrip(t *testing.T) {
	in := realisticSpans(50)
	for i := range in {
		in[i].Normalize()
	}
	body := AppendJSONV2Spans(nil, in)
	if !json.Valid(body) {
		t.Fatalf("encoder wrote invalid JSON: %s", body)
	}
	out := mustDecodeV2(t, string(body))
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip differs:\n in: %+v\nout: %+v", in[1], out[1])
	}
	again := AppendJSONV2Spans(nil, out)
	if string(again) != string(body) {
		t.Fatalf("re-encoding differs:\n%s\n%s", body, again)
	}
}

func TestJSONV2EncodeFieldOrder(t *testing.T) {
	s := model.Span{
		TraceID:        model.TraceID{Low: 1},
		ParentID:       2,
		ID:             3,
		Kind:           model.KindClient,
		Name:           "get",
		Timestamp:      10,
		Duration:       20,
		LocalEndpoint:  &model.Endpoint{ServiceName: "fe", IPv4: netip.MustParseAddr("1.2.3.4"), IPv6: netip.MustParseAddr("::1"), Port: 80},
		RemoteEndpoint: &model.Endpoint{ServiceName: "be"},
		Annotations:    []model.Annotation{{Timestamp: 15, Value: "b"}, {Timestamp: 11, Value: "a"}},
		Tags:           map[string]string{"z": "1", "a": "2"},
		Debug:          true,
		Shared:         true,
	}
	got := string(AppendJSONV2Span(nil, &s))
	want := `{"traceId":"0000000000000001","parentId":"0000000000000002","id":"0000000000000003","kind":"CLIENT","name":"get","timestamp":10,"duration":20,` +
		`"localEndpoint":{"serviceName":"fe","ipv4":"1.2.3.4","ipv6":"::1","port":80},"remoteEndpoint":{"serviceName":"be"},` +
		`"annotations":[{"timestamp":11,"value":"a"},{"timestamp":15,"value":"b"}],"tags":{"a":"2","z":"1"},"debug":true,"shared":true}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if s.Annotations[0].Value != "b" {
		t.Fatal("encoder sorted the caller's annotations in place")
	}
}

func TestJSONV2Leniency(t *testing.T) {
	const base = `"traceId":"463ac35c9f6413ad48485a3953bb6124","id":"a2fb4a1d1a96d312"`
	tests := []struct {
		name string
		body string
		want func(s *model.Span) bool
	}{
		{"short trace ID padded to 16", `[{"traceId":"a","id":"b"}]`, func(s *model.Span) bool {
			return s.TraceID == model.TraceID{Low: 0xa} && s.ID == 0xb && s.TraceID.String() == "000000000000000a"
		}},
		{"17-char trace ID padded to 32", `[{"traceId":"10000000000000000","id":"1"}]`, func(s *model.Span) bool {
			return s.TraceID == model.TraceID{High: 1, Low: 0}
		}},
		{"32-char trace ID with zero high is 64-bit", `[{"traceId":"0000000000000000000000000000000a","id":"1"}]`, func(s *model.Span) bool {
			return s.TraceID == model.TraceID{Low: 0xa}
		}},
		{"all-zero parentId is absent", `[{` + base + `,"parentId":"0000000000000000"}]`, func(s *model.Span) bool { return s.ParentID == 0 }},
		{"parentId equal to id is cleared", `[{` + base + `,"parentId":"a2fb4a1d1a96d312"}]`, func(s *model.Span) bool { return s.ParentID == 0 }},
		{"name lower-cased", `[{` + base + `,"name":"GET /Foo"}]`, func(s *model.Span) bool { return s.Name == "get /foo" }},
		{"negative timestamp absent", `[{` + base + `,"timestamp":-1}]`, func(s *model.Span) bool { return s.Timestamp == 0 }},
		{"negative duration absent", `[{` + base + `,"duration":-5}]`, func(s *model.Span) bool { return s.Duration == 0 }},
		{"zero duration absent", `[{` + base + `,"duration":0}]`, func(s *model.Span) bool { return s.Duration == 0 }},
		{"integral float timestamp", `[{` + base + `,"timestamp":1.5e6}]`, func(s *model.Span) bool { return s.Timestamp == 1500000 }},
		{"quoted number timestamp", `[{` + base + `,"timestamp":"123"}]`, func(s *model.Span) bool { return s.Timestamp == 123 }},
		{"debug false not recorded", `[{` + base + `,"debug":false,"shared":false}]`, func(s *model.Span) bool { return !s.Debug && !s.Shared }},
		{"debug and shared true", `[{` + base + `,"debug":true,"shared":true,"kind":"SERVER"}]`, func(s *model.Span) bool { return s.Debug && s.Shared }},
		{"shared cleared on client", `[{` + base + `,"shared":true,"kind":"CLIENT"}]`, func(s *model.Span) bool { return !s.Shared && s.Kind == model.KindClient }},
		{"service name lower-cased", `[{` + base + `,"localEndpoint":{"serviceName":"FrontEnd"}}]`, func(s *model.Span) bool {
			return s.LocalServiceName() == "frontend"
		}},
		{"unparseable IPs dropped", `[{` + base + `,"localEndpoint":{"serviceName":"a","ipv4":"999.1.1.1","ipv6":"zz::"}}]`, func(s *model.Span) bool {
			return s.LocalEndpoint != nil && !s.LocalEndpoint.IPv4.IsValid() && !s.LocalEndpoint.IPv6.IsValid()
		}},
		{"endpoint of only an unparseable IP is absent", `[{` + base + `,"localEndpoint":{"ipv4":"nope"}}]`, func(s *model.Span) bool { return s.LocalEndpoint == nil }},
		{"IPv6 in ipv4 field goes to IPv6", `[{` + base + `,"remoteEndpoint":{"ipv4":"2001:db8::2"}}]`, func(s *model.Span) bool {
			return s.RemoteEndpoint.IPv6 == netip.MustParseAddr("2001:db8::2") && !s.RemoteEndpoint.IPv4.IsValid()
		}},
		{"IPv4-mapped IPv6 becomes IPv4", `[{` + base + `,"remoteEndpoint":{"ipv6":"::ffff:10.1.2.3"}}]`, func(s *model.Span) bool {
			return s.RemoteEndpoint.IPv4 == netip.MustParseAddr("10.1.2.3") && !s.RemoteEndpoint.IPv6.IsValid()
		}},
		{"port zero or negative absent", `[{` + base + `,"localEndpoint":{"serviceName":"a","port":-80},"remoteEndpoint":{"port":0}}]`, func(s *model.Span) bool {
			return s.LocalEndpoint.Port == 0 && s.RemoteEndpoint == nil
		}},
		{"port 65535 kept", `[{` + base + `,"localEndpoint":{"port":65535}}]`, func(s *model.Span) bool { return s.LocalEndpoint.Port == 65535 }},
		{"empty endpoint absent", `[{` + base + `,"localEndpoint":{},"remoteEndpoint":{"serviceName":""}}]`, func(s *model.Span) bool {
			return s.LocalEndpoint == nil && s.RemoteEndpoint == nil
		}},
		{"unknown fields ignored", `[{` + base + `,"foo":{"bar":[1,2,{"x":null}]},"localEndpoint":{"zone":"z","serviceName":"a"},"annotations":[{"timestamp":1,"value":"v","extra":true}]}]`, func(s *model.Span) bool {
			return s.LocalServiceName() == "a" && len(s.Annotations) == 1
		}},
		{"null optional fields ignored", `[{` + base + `,"parentId":null,"kind":null,"name":null,"timestamp":null,"duration":null,"localEndpoint":null,"remoteEndpoint":null,"annotations":null,"tags":null,"debug":null,"shared":null}]`, func(s *model.Span) bool {
			return s.ParentID == 0 && s.Kind == "" && s.LocalEndpoint == nil && s.Tags == nil
		}},
		{"null inside endpoint ignored", `[{` + base + `,"localEndpoint":{"serviceName":null,"ipv4":null,"port":null,"ipv6":"::2"}}]`, func(s *model.Span) bool {
			return s.LocalEndpoint.IPv6 == netip.MustParseAddr("::2")
		}},
		{"numeric tag value kept as text", `[{` + base + `,"tags":{"http.status_code":200}}]`, func(s *model.Span) bool { return s.Tags["http.status_code"] == "200" }},
		{"empty tag value kept", `[{` + base + `,"tags":{"error":""}}]`, func(s *model.Span) bool { v, ok := s.Tags["error"]; return ok && v == "" }},
		{"empty tags absent", `[{` + base + `,"tags":{},"annotations":[]}]`, func(s *model.Span) bool { return s.Tags == nil && s.Annotations == nil }},
		{"annotations sorted and deduplicated", `[{` + base + `,"annotations":[{"timestamp":2,"value":"b"},{"timestamp":1,"value":"a"},{"timestamp":2,"value":"b"}]}]`, func(s *model.Span) bool {
			return reflect.DeepEqual(s.Annotations, []model.Annotation{{Timestamp: 1, Value: "a"}, {Timestamp: 2, Value: "b"}})
		}},
		{"escapes decoded", `[{` + base + `,"name":"a\"b\\c\u00e9\ud83d\ude00\n","tags":{"k\u0041":"\/"}}]`, func(s *model.Span) bool {
			return s.Name == "a\"b\\cé😀\n" && s.Tags["kA"] == "/"
		}},
		{"white space everywhere", " \n[ {\t\"traceId\" : \"1\" , \"id\" : \"2\" } ]\r\n", func(s *model.Span) bool { return s.ID == 2 }},
		{"duplicate field: last wins", `[{` + base + `,"name":"a","name":"b"}]`, func(s *model.Span) bool { return s.Name == "b" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spans := mustDecodeV2(t, tt.body)
			if len(spans) != 1 {
				t.Fatalf("got %d spans", len(spans))
			}
			if !tt.want(&spans[0]) {
				t.Fatalf("unexpected span %+v (local %+v remote %+v)", spans[0], spans[0].LocalEndpoint, spans[0].RemoteEndpoint)
			}
		})
	}
}

func TestJSONV2EmptyBodies(t *testing.T) {
	for _, body := range []string{"", "  \n", "[]", " [ ] "} {
		spans, err := DecodeJSONV2([]byte(body))
		if err != nil || len(spans) != 0 {
			t.Errorf("%q: spans %v, err %v", body, spans, err)
		}
	}
}

// TestJSONV2Errors checks every rejection and its message: the message the
// HTTP server answers with, and the span's index.
func TestJSONV2Errors(t *testing.T) {
	const base = `"traceId":"463ac35c9f6413ad","id":"a2fb4a1d1a96d312"`
	tests := []struct {
		name string
		span string // one span object, placed at index 1 of a 3-span list
		msg  string // the whole BatchError message
	}{
		{"upper-case trace ID", `{"traceId":"463AC35C9F6413AD","id":"1"}`, "463AC35C9F6413AD should be lower-hex encoded with no prefix at $[1].traceId reading List<Span> from json"},
		{"0x prefix", `{"traceId":"0x463ac35c9f6413ad","id":"1"}`, "0x463ac35c9f6413ad should be lower-hex encoded with no prefix at $[1].traceId reading List<Span> from json"},
		{"trace ID too long", `{"traceId":"463ac35c9f6413ad463ac35c9f6413ad0","id":"1"}`, "traceId.length > 32 at $[1].traceId reading List<Span> from json"},
		{"empty trace ID", `{"traceId":"","id":"1"}`, "traceId was empty at $[1].traceId reading List<Span> from json"},
		{"all-zero trace ID", `{"traceId":"00000000000000000000000000000000","id":"1"}`, "traceId is all zeros at $[1].traceId reading List<Span> from json"},
		{"null trace ID", `{"traceId":null,"id":"1"}`, "Expected a string but was NULL at $[1].traceId reading List<Span> from json"},
		{"all-zero span ID", `{"traceId":"1","id":"0000"}`, "id is all zeros at $[1].id reading List<Span> from json"},
		{"span ID too long", `{"traceId":"1","id":"a2fb4a1d1a96d3120"}`, "id.length > 16 at $[1].id reading List<Span> from json"},
		{"upper-case span ID", `{"traceId":"1","id":"A"}`, "A should be lower-hex encoded with no prefix at $[1].id reading List<Span> from json"},
		{"empty parent ID", `{` + base + `,"parentId":""}`, "parentId was empty at $[1].parentId reading List<Span> from json"},
		{"bad parent ID", `{` + base + `,"parentId":"xyz"}`, "xyz should be lower-hex encoded with no prefix at $[1].parentId reading List<Span> from json"},
		{"missing trace ID", `{"id":"1"}`, "Missing : traceId at $[1] reading List<Span> from json"},
		{"missing both IDs", `{"name":"x"}`, "Missing : traceId id at $[1] reading List<Span> from json"},
		{"lower-case kind", `{` + base + `,"kind":"client"}`, "No enum constant zipkin2.Span.Kind.client at $[1].kind reading List<Span> from json"},
		{"empty kind", `{` + base + `,"kind":""}`, "No enum constant zipkin2.Span.Kind. at $[1].kind reading List<Span> from json"},
		{"port too large", `{` + base + `,"localEndpoint":{"port":65536}}`, "invalid port 65536 at $[1].localEndpoint.port reading List<Span> from json"},
		{"port not an int", `{` + base + `,"remoteEndpoint":{"port":4294967296}}`, "Expected an int but was 4294967296 at $[1].remoteEndpoint.port reading List<Span> from json"},
		{"annotation without value", `{` + base + `,"annotations":[{"timestamp":1,"value":"a"},{"timestamp":1}]}`, "Incomplete annotation at $[1].annotations[1] reading List<Span> from json"},
		{"annotation without timestamp", `{` + base + `,"annotations":[{"value":"a"}]}`, "Incomplete annotation at $[1].annotations[0] reading List<Span> from json"},
		{"null tag value", `{` + base + `,"tags":{"ok":"1","key":null}}`, "No value at $[1].tags.key reading List<Span> from json"},
		{"boolean tag value", `{` + base + `,"tags":{"key":true}}`, "Expected a string but was BOOLEAN at $[1].tags.key reading List<Span> from json"},
		{"timestamp not a long", `{` + base + `,"timestamp":1.5}`, "Expected a long but was 1.5 at $[1].timestamp reading List<Span> from json"},
		{"timestamp a string", `{` + base + `,"timestamp":"soon"}`, "Expected a long but was soon at $[1].timestamp reading List<Span> from json"},
		{"debug not a boolean", `{` + base + `,"debug":"true"}`, "Expected a boolean but was STRING at $[1].debug reading List<Span> from json"},
		{"span not an object", `42`, "Expected BEGIN_OBJECT but was NUMBER at $[1] reading List<Span> from json"},
		{"endpoint not an object", `{` + base + `,"localEndpoint":"fe"}`, "Expected BEGIN_OBJECT but was STRING at $[1].localEndpoint reading List<Span> from json"},
		{"annotations not an array", `{` + base + `,"annotations":{}}`, "Expected BEGIN_ARRAY but was BEGIN_OBJECT at $[1].annotations reading List<Span> from json"},
	}
	good := `{"traceId":"1","id":"1"}`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := "[" + good + "," + tt.span + `,{"traceId":"1","id":"3"}]`
			spans, err := DecodeJSONV2([]byte(body))
			var be *BatchError
			if !errors.As(err, &be) {
				t.Fatalf("error %v (%T), want *BatchError", err, err)
			}
			if got := err.Error(); got != tt.msg {
				t.Errorf("message\n got %q\nwant %q", got, tt.msg)
			}
			if be.Malformed || len(be.Errors) != 1 || be.Errors[0].Index != 1 {
				t.Errorf("errors %+v malformed %v, want one at index 1", be.Errors, be.Malformed)
			}
			if len(spans) != 2 || spans[0].ID != 1 || spans[1].ID != 3 {
				t.Errorf("good spans %+v, want IDs 1 and 3", spans)
			}
		})
	}
}

func TestJSONV2IDErrorsUnwrap(t *testing.T) {
	_, err := DecodeJSONV2([]byte(`[{"traceId":"X","id":"1"}]`))
	var ie *model.IDError
	if !errors.As(err, &ie) || ie.Field != "traceId" {
		t.Fatalf("errors.As(*model.IDError) failed on %v", err)
	}
}

func TestJSONV2EveryBadSpanReported(t *testing.T) {
	var b strings.Builder
	b.WriteString("[")
	for i := 0; i < 10; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		if i%3 == 0 {
			b.WriteString(`{"traceId":"1","id":"1","tags":{"k":null}}`)
		} else {
			b.WriteString(`{"traceId":"1","id":"2"}`)
		}
	}
	b.WriteString("]")
	spans, err := DecodeJSONV2([]byte(b.String()))
	var be *BatchError
	if !errors.As(err, &be) {
		t.Fatal(err)
	}
	if got := be.Indexes(); !reflect.DeepEqual(got, []int{0, 3, 6, 9}) {
		t.Fatalf("indexes %v", got)
	}
	if len(spans) != 6 {
		t.Fatalf("%d good spans, want 6", len(spans))
	}
	want := "No value at $[0].tags.k; No value at $[3].tags.k; No value at $[6].tags.k; No value at $[9].tags.k reading List<Span> from json (4 invalid spans)"
	if err.Error() != want {
		t.Fatalf("message %q", err.Error())
	}
}

func TestJSONV2Malformed(t *testing.T) {
	tests := []struct {
		body     string
		good     int
		index    int
		contains string
	}{
		{`{"traceId":"1","id":"1"}`, 0, -1, "expected '['"},
		{`[{"traceId":"1","id":"1"},{"traceId":"1" "id":"2"}]`, 1, 1, "expected ',' or '}'"},
		{`[{"traceId":"1","id":"1"}`, 1, -1, "unexpected end of input"},
		{`[{"traceId":"1","id":"1"},]`, 1, -1, "trailing comma"},
		{`[{"traceId":"1","id":"1"}] x`, 1, -1, "unexpected data after the list"},
		{`[{"traceId":"1","id":"1","name":"\x"}]`, 0, 0, "invalid escape"},
		{`[{"traceId":"1","id":"1","name":"abc}]`, 0, 0, "unterminated string"},
		{`[{"traceId":"1","id":"1","x":tru}]`, 0, 0, "invalid literal"},
		{`[{"traceId":"1","id":"1","x":-}]`, 0, 0, "invalid number"},
		{"\x01\x02\x03\x04", 0, -1, "expected '['"},
		{`[` + strings.Repeat(`[`, 1000) + strings.Repeat(`]`, 1000) + `]`, 0, 0, "nesting"},
	}
	for _, tt := range tests {
		spans, err := DecodeJSONV2([]byte(tt.body))
		var be *BatchError
		if !errors.As(err, &be) || !be.Malformed {
			t.Errorf("%s: err %v, want malformed BatchError", tt.body, err)
			continue
		}
		last := be.Errors[len(be.Errors)-1]
		if !strings.Contains(last.Error(), "Malformed (") || !strings.Contains(err.Error(), tt.contains) ||
			!strings.Contains(err.Error(), "reading List<Span> from json") || last.Index != tt.index || len(spans) != tt.good {
			t.Errorf("%.60s: %q index %d, %d good spans", tt.body, err, last.Index, len(spans))
		}
	}
}

func TestAppendHelpers(t *testing.T) {
	if got := string(AppendStrings(nil, nil)); got != "[]" {
		t.Errorf("AppendStrings(nil) = %s", got)
	}
	if got := string(AppendStrings(nil, []string{"a", "b\"\x00\u2028\xff"})); got != "[\"a\",\"b\\\"\\u0000\\u2028\uFFFD\"]" {
		t.Errorf("AppendStrings = %s", got)
	}
	links := []model.DependencyLink{{Parent: "a", Child: "b", CallCount: 3}, {Parent: "b", Child: "c", CallCount: 2, ErrorCount: 1}}
	if got := string(AppendDependencyLinks(nil, links)); got != `[{"parent":"a","child":"b","callCount":3},{"parent":"b","child":"c","callCount":2,"errorCount":1}]` {
		t.Errorf("AppendDependencyLinks = %s", got)
	}
	if got := string(AppendDependencyLinks(nil, nil)); got != "[]" {
		t.Errorf("AppendDependencyLinks(nil) = %s", got)
	}
	traces := [][]model.Span{{{TraceID: model.TraceID{Low: 1}, ID: 1}}, {}}
	if got := string(AppendJSONV2Traces(nil, traces)); got != `[[{"traceId":"0000000000000001","id":"0000000000000001"}],[]]` {
		t.Errorf("AppendJSONV2Traces = %s", got)
	}
	if got := string(AppendJSONV2Traces(nil, nil)); got != "[]" {
		t.Errorf("AppendJSONV2Traces(nil) = %s", got)
	}
}

// TestJSONEscapingIsValidJSON feeds hostile strings through the encoder and
// checks encoding/json reads back the same text (after U+FFFD replacement).
func TestJSONEscapingIsValidJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "\"quoted\"", `back\slash`, "\x00\x01\x1f\x7f", "tab\there", "</script><b>&amp;", "emoji 😀", "bad \xc3\x28 utf8", "\u2028\u2029", "é"} {
		b := appendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("%q encoded as invalid JSON %s: %v", s, b, err)
			continue
		}
		if want := strings.ToValidUTF8(s, "\ufffd"); got != want {
			t.Errorf("%q read back as %q", s, got)
		}
	}
}

// A span that is invalid and then cut off is one invalid span, however
// many of its problems are listed.
func TestJSONV2MalformedCountsSpansOnce(t *testing.T) {
	_, err := DecodeJSONV2([]byte(`[{"traceId":`))
	var be *BatchError
	if !errors.As(err, &be) || !be.Malformed {
		t.Fatalf("err %v, want malformed BatchError", err)
	}
	if strings.Contains(err.Error(), "invalid spans") || !reflect.DeepEqual(be.Indexes(), []int{0}) {
		t.Fatalf("%q, indexes %v: want one invalid span", err, be.Indexes())
	}
	_, err = DecodeJSONV2([]byte(`[{"traceId":"x","id":"1"},{"traceId":`))
	if !strings.HasSuffix(err.Error(), "(2 invalid spans)") {
		t.Fatalf("%q: want (2 invalid spans)", err)
	}
}
