package mysqlstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
	"github.com/sqlpool/sqlpool/app/zipkin/mysqlstore"
)

// With MaxTxRows, Accept writes a batch as several transactions of at most
// that many rows, and stores exactly what one transaction stores: every
// span and every tag, a span with more tags than MaxTxRows included, once
// each also when the batch is written again.
func TestAcceptMaxTxRows(t *testing.T) {
	forEachServer(t, func(t *testing.T, srv server) {
		_, db := newStore(t, srv)
		ctx := ctxT(t)
		s, err := mysqlstore.Open(ctx, db, mysqlstore.Options{Logger: quietLogger, MaxTxRows: 7})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UnixMicro()
		var spans []model.Span
		wantTags := 0
		for i := 1; i <= 5; i++ {
			tags := map[string]string{}
			for k := 0; k < i*6; k++ { // the last span has 30 tags: more than MaxTxRows
				tags[fmt.Sprintf("k%02d", k)] = fmt.Sprint(k)
			}
			wantTags += len(tags)
			spans = append(spans, model.Span{TraceID: model.TraceID{Low: 0x51}, ID: model.ID(i), Name: "op", Kind: model.KindServer,
				Timestamp: now + int64(i), Duration: 10, LocalEndpoint: &model.Endpoint{ServiceName: "svc"}, Tags: tags})
		}
		before := s.Stats()
		for round := 0; round < 2; round++ { // the second round writes every row again
			if err := s.Accept(ctx, spans); err != nil {
				t.Fatal(err)
			}
		}
		if n := count(t, db, "zipkin_spans"); n != 5 {
			t.Errorf("zipkin_spans: %d rows, want 5", n)
		}
		// Each span: its tags, sr and ss.
		if n, want := count(t, db, "zipkin_annotations"), wantTags+2*5; n != want {
			t.Errorf("zipkin_annotations: %d rows, want %d", n, want)
		}
		got, err := s.GetTrace(ctx, model.TraceID{Low: 0x51})
		if err != nil {
			t.Fatal(err)
		}
		tags := 0
		for _, sp := range got {
			tags += len(sp.Tags)
		}
		if len(got) != 5 || tags != wantTags {
			t.Errorf("GetTrace: %d spans with %d tags, want 5 with %d", len(got), tags, wantTags)
		}
		// 5 span rows and 100 annotation rows in parts of 7: at least 15
		// statements per Accept.
		if st := s.Stats().Statements - before.Statements; st < 2*15 {
			t.Errorf("%d statements for two Accepts, want at least 30 (parts of at most 7 rows)", st)
		}
	})
}
