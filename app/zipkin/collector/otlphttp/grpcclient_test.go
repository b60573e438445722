package otlphttp_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	zipkin_proto3 "github.com/openzipkin/zipkin-go/proto/zipkin_proto3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sqlpool/sqlpool/app/zipkin/collector/grpccollector"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

// TestZipkinGRPCClientUnderBackPressure is TestRealClientsUnderBackPressure
// for Zipkin's SpanService/Report: a grpc-go client sending zipkin-go's
// generated zipkin_proto3 messages (Zipkin's proto; zipkin-go has no gRPC
// reporter) in batches, as a reporter does, and sending a batch again
// after the delay of the RetryInfo of an UNAVAILABLE, while the store is
// held three times so that the queue fills. Every span of a batch the
// client saw succeed is read back exactly once, and in the end every
// batch succeeded.
func TestZipkinGRPCClientUnderBackPressure(t *testing.T) {
	nSpans, nTraces := loadSize()
	e := newEnv(t, server.Config{MaxQueueSpans: nSpans / 5})
	cc := dial(t, strings.TrimPrefix(e.base, "http://"))
	perTrace, batch := nSpans/nTraces, nSpans/10

	var spans []*zipkin_proto3.Span
	traceIDs := make([]string, 0, nTraces)
	now := time.Now().UnixMicro()
	for i := 0; i < nTraces; i++ {
		tid := make([]byte, 16)
		_, _ = rand.Read(tid)
		tid[0] |= 0x10 // 128-bit: the high half is not zero
		traceIDs = append(traceIDs, hex.EncodeToString(tid))
		root := make([]byte, 8)
		_, _ = rand.Read(root)
		root[0] |= 0x10
		for j := 0; j < perTrace; j++ {
			sp := &zipkin_proto3.Span{TraceId: tid, Id: root, Name: "root", Kind: zipkin_proto3.Span_SERVER,
				Timestamp: uint64(now), Duration: 100, LocalEndpoint: &zipkin_proto3.Endpoint{ServiceName: "load-grpc"}}
			if j > 0 {
				sp.Id = append([]byte(nil), root...)
				sp.Id[7] ^= byte(j)
				sp.Id[6] ^= 0x80 // never equal to the root's
				sp.ParentId, sp.Name, sp.Kind = root, fmt.Sprintf("child-%d", j), zipkin_proto3.Span_CLIENT
				sp.RemoteEndpoint = &zipkin_proto3.Endpoint{ServiceName: "db"}
				sp.Tags = map[string]string{"i": fmt.Sprint(j)}
			}
			spans = append(spans, sp)
		}
	}

	done := make(chan struct{})
	holds := holdUntilRefused(e, "grpc", done)
	ok := map[string]int{}
	calls, refused := 0, 0
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	for i := 0; i < len(spans); i += batch {
		list := &zipkin_proto3.ListOfSpans{Spans: spans[i:min(i+batch, len(spans))]}
		for {
			calls++
			err := cc.Invoke(ctx, grpccollector.ZipkinReportMethod, list, &emptypb.Empty{})
			if err == nil {
				for _, s := range list.Spans {
					ok[hex.EncodeToString(s.TraceId)+"/"+hex.EncodeToString(s.Id)]++
				}
				break
			}
			ri := retryInfo(err)
			if status.Code(err) != codes.Unavailable || ri == nil {
				close(done)
				<-holds
				t.Fatalf("Report: %v (RetryInfo %v): want success, or UNAVAILABLE with RetryInfo", err, ri)
			}
			refused++
			select {
			case <-time.After(ri.GetRetryDelay().AsDuration()):
			case <-ctx.Done():
				close(done)
				<-holds
				t.Fatalf("retrying a refused batch: %v", ctx.Err())
			}
		}
	}
	close(done)
	nHolds := <-holds
	e.waitDrained(t)
	took := time.Since(start)

	seen := e.spansByID(t, traceIDs)
	for id, n := range ok {
		if n != 1 {
			t.Errorf("span %s reported successfully %d times", id, n)
		}
		if seen[id] != 1 {
			t.Errorf("span %s: the client saw success, read back %d times", id, seen[id])
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("span %s read back %d times", id, n)
		}
	}
	rejected := e.counter(t, server.NameMessagesRejected, "grpc")
	t.Logf("grpc: %d spans in %d traces; %d calls, %d refused (UNAVAILABLE) in %d holds; stored in %v (%.0f spans/s)",
		len(ok), nTraces, calls, refused, nHolds, took.Round(time.Millisecond), float64(len(ok))/took.Seconds())
	if rejected == 0 || refused == 0 || nHolds == 0 {
		t.Errorf("the queue was never full (%v refusals): the test did not exercise back-pressure", rejected)
	}
	if len(ok) != nSpans {
		t.Errorf("%d of %d spans succeeded", len(ok), nSpans)
	}
	if got := e.counter(t, server.NameSpans, "grpc"); got < float64(nSpans) {
		t.Errorf("zipkin_collector_spans_total{transport=\"grpc\"} = %v, want at least %d", got, nSpans)
	}
}
