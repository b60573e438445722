package mysqlstore_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// testSpans returns n spans in traces of 10 (a client/server tree with tags, annotations and
// remote endpoints), with trace IDs from seed.
func testSpans(seed uint64, n int) []model.Span {
	r := rand.New(rand.NewPCG(seed, 7))
	kinds := []model.Kind{model.KindClient, model.KindServer, model.KindProducer, model.KindConsumer, model.KindUnset}
	spans := make([]model.Span, 0, n)
	var tid model.TraceID
	for i := 0; i < n; i++ {
		if i%10 == 0 {
			tid = model.TraceID{High: r.Uint64() >> uint(r.IntN(2)*64%64), Low: r.Uint64() | 1}
		}
		ts := int64(1_700_000_000_000_000 + i*1000)
		sp := model.Span{
			TraceID: tid, ID: model.ID(i%10 + 1), Kind: kinds[i%len(kinds)], Name: fmt.Sprintf("op-%d", i%7),
			Timestamp: ts, Duration: int64(1 + r.IntN(1000)),
			LocalEndpoint: ep(fmt.Sprintf("svc-%d", i%5), "10.0.0.1", 8000+i%3),
			Tags:          map[string]string{"http.path": fmt.Sprintf("/p/%d", i), "n": "1"},
			Annotations:   []model.Annotation{{Timestamp: ts + 1, Value: "wire.send"}},
		}
		if i%10 != 0 {
			sp.ParentID = model.ID(i % 10)
		}
		if i%2 == 0 {
			sp.RemoteEndpoint = ep(fmt.Sprintf("remote-%d", i%3), "", 0)
		}
		spans = append(spans, sp)
	}
	return spans
}

// The same 10,000 spans written twice are stored once, and no error reaches the caller.
func TestAcceptTwiceStoredOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: writes thousands of spans twice (5-15 s on the embedded server)")
	}
	forEachServer(t, func(t *testing.T, srv server) {
		s, db := newStore(t, srv)
		ctx := ctxT(t)
		n := 10_000
		if srv.name == "embedded" {
			// go-mysql-server's in-memory tables slow down as they grow: a write of 100 spans
			// takes seconds once they hold a few thousand rows (1,000 spans written twice took
			// 106 s). MariaDB writes all 10,000; the embedded server checks the same promise on 300.
			n = 300
		}
		spans := testSpans(1, n)
		var annRows int
		for round := 0; round < 2; round++ {
			for i := 0; i < len(spans); i += 100 {
				if err := s.Accept(ctx, spans[i:i+100]); err != nil {
					t.Fatalf("round %d, batch at %d: %v", round+1, i, err)
				}
			}
			if got := count(t, db, "zipkin_spans"); got != n {
				t.Fatalf("round %d: %d span rows, want %d", round+1, got, n)
			}
			got := count(t, db, "zipkin_annotations")
			if round == 0 {
				annRows = got
			} else if got != annRows {
				t.Fatalf("annotation rows: %d after the first write, %d after the second", annRows, got)
			}
		}
		st := s.Stats()
		if st.Batches != int64(2*n/100) || st.Spans != int64(2*n) || st.Failures != 0 {
			t.Errorf("Stats = %+v, want %d batches of %d spans, no failures", st, 2*n/100, 2*n)
		}
		t.Logf("%d annotation rows; %+v", annRows, st)
	})
}

// Bad input never loses a batch: values that do not fit are stored truncated or replaced, and
// spans that cannot be stored are named by index while the rest are stored.
func TestAcceptBadInput(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		s, db := newStore(t, srv)
		ctx := ctxT(t)
		tid := model.TraceID{Low: 77}
		long := strings.Repeat("é", 300)        // 600 bytes, 300 characters
		longEmoji := strings.Repeat("a😀", 200)  // 400 characters
		bigValue := strings.Repeat("é", 40_000) // 80,000 bytes
		const emoji = "😀"
		spans := []model.Span{
			0: {TraceID: tid, ID: 1, Name: long, Timestamp: 10, LocalEndpoint: ep(long, "", 0)},
			1: {TraceID: tid, ID: 2, Kind: model.KindClient, Name: "get " + emoji, Timestamp: 10,
				LocalEndpoint: ep("svc"+emoji, "", 0), RemoteEndpoint: ep("far"+emoji, "", 0),
				Annotations: []model.Annotation{{Timestamp: 11, Value: "ann" + emoji}},
				Tags:        map[string]string{"key" + emoji: "val" + emoji}},
			2: {ID: 3, Name: "zero trace id"},
			3: {TraceID: tid, ID: 4, Name: "bad\xff\xfeutf8", Timestamp: 10, LocalEndpoint: ep("s", "", 0),
				Tags: map[string]string{"raw": "\xff\x00bytes"}},
			4: {TraceID: tid, ID: 5, Timestamp: 10, LocalEndpoint: ep("s", "", 0),
				Tags: map[string]string{"big": bigValue, longEmoji: ""}},
			5: {TraceID: tid, ID: 6, Timestamp: 10, LocalEndpoint: ep("", "", 1),
				Annotations: []model.Annotation{{Timestamp: 12, Value: ""}, {Timestamp: 13, Value: longEmoji}},
				Tags:        map[string]string{"": ""}},
			6: {TraceID: tid, Name: "zero span id"},
			7: {TraceID: tid, ID: 8, Kind: "BOGUS"},
		}
		err := s.Accept(ctx, spans)
		var inv *mysqlstore.InvalidSpansError
		if !errors.As(err, &inv) {
			t.Fatalf("Accept = %v, want an *InvalidSpansError", err)
		}
		var idx []int
		for _, e := range inv.Spans {
			idx = append(idx, e.Index)
		}
		if fmt.Sprint(idx) != "[2 6 7]" {
			t.Errorf("rejected spans %v, want [2 6 7]; error: %v", idx, err)
		}
		for _, want := range []string{"span 2", "trace ID is zero", "span 6", "span ID is zero", `unknown kind "BOGUS"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if st := s.Stats(); st.Rejected != 3 || st.Spans != 5 || st.Failures != 0 {
			t.Errorf("Stats = %+v, want 3 rejected, 5 stored", st)
		}
		fffd := "\uFFFD"
		long255 := strings.Repeat("é", 255)
		long255Emoji := strings.Repeat("a"+fffd, 127) + "a"
		checkRows(t, "zipkin_spans", dump(t, db, "SELECT id, name, remote_service_name FROM zipkin_spans ORDER BY id"), []string{
			fmt.Sprintf("1|%q|\"\"", long255),
			fmt.Sprintf("2|%q|%q", "get "+fffd, "far"+fffd),
			fmt.Sprintf("4|%q|\"\"", "bad"+fffd+fffd+"utf8"),
			`5|""|""`,
			`6|""|""`,
		})
		got := dump(t, db, `SELECT span_id, a_key, a_value, endpoint_service_name FROM zipkin_annotations
			WHERE a_type <> 0 ORDER BY span_id, a_timestamp, a_key`)
		want := []string{
			fmt.Sprintf("1|\"lc\"|\"\"|%q", long255),
			fmt.Sprintf("2|\"cs\"|NULL|%q", "svc"+fffd),
			fmt.Sprintf("2|%q|%q|%q", "key"+fffd, "val"+emoji, "svc"+fffd), // BLOB keeps the exact bytes
			fmt.Sprintf("2|%q|NULL|%q", "ann"+fffd, "svc"+fffd),
			fmt.Sprintf("4|\"raw\"|%q|\"s\"", "\xff\x00bytes"),
			fmt.Sprintf("5|%q|%q|\"s\"", long255Emoji, ""),
			fmt.Sprintf("5|\"big\"|%q|\"s\"", strings.Repeat("é", 32_767)), // 65,534 bytes: cut on a character boundary
			`6|""|""|""`,
			`6|""|NULL|""`,
			fmt.Sprintf("6|%q|NULL|\"\"", long255Emoji),
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			short := func(v []string) string {
				var b strings.Builder
				for _, s := range v {
					if len(s) > 200 {
						s = s[:200] + fmt.Sprintf("…(%d bytes)", len(s))
					}
					b.WriteString("\n  " + s)
				}
				return b.String()
			}
			t.Errorf("annotation rows:\n got:%s\n want:%s", short(got), short(want))
		}
	})
}
