package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// Writers own disjoint shares of the trace IDs: two batches being written
// at the same time never hold spans of the same trace (the row-lock
// conflicts behind deadlocks between batch transactions), even when every
// POST mixes several traces and each trace arrives in many POSTs. Every
// accepted span is still stored exactly once.
func TestWritersOwnTraces(t *testing.T) {
	var mu sync.Mutex
	inFlight := map[uint64]int{} // trace low bits → Accept calls holding it
	overlaps, concurrent, maxConcurrent := 0, 0, 0
	store := &fakeStore{}
	store.setHook(func(ctx context.Context, spans []model.Span) error {
		traces := map[uint64]bool{}
		for _, s := range spans {
			traces[s.TraceID.Low] = true
		}
		mu.Lock()
		concurrent++
		maxConcurrent = max(maxConcurrent, concurrent)
		for tr := range traces {
			if inFlight[tr] > 0 {
				overlaps++
			}
			inFlight[tr]++
		}
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // let other writers overlap
		mu.Lock()
		concurrent--
		for tr := range traces {
			inFlight[tr]--
		}
		mu.Unlock()
		return nil
	})
	_, hs, _ := newTestServer(t, store, Config{Writers: 4, BatchSpans: 20, MaxQueueSpans: 100_000})
	const traces, posts = 16, 200
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < posts/4; i++ {
				// 5 spans of 5 different traces (of 16) per POST.
				parts := make([]string, 5)
				for j := range parts {
					tr := (g*7 + i*5 + j) % traces
					parts[j] = fmt.Sprintf(`{"traceId":"%016x","id":"%016x","name":"op","timestamp":%d,"localEndpoint":{"serviceName":"svc"}}`,
						0xabc000+tr, (g*posts+i)*8+j+1, time.Now().UnixMicro())
				}
				resp, err := http.Post(hs.URL+"/api/v2/spans", "application/json", strings.NewReader("["+strings.Join(parts, ",")+"]"))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		}(g)
	}
	wg.Wait()
	waitDrained(t, hs.URL)
	if n := len(store.Stored()); n != posts*5 {
		t.Fatalf("stored %d spans, want %d", n, posts*5)
	}
	seen := map[model.ID]bool{}
	for _, s := range store.Stored() {
		if seen[s.ID] {
			t.Fatalf("span %s stored twice", s.ID)
		}
		seen[s.ID] = true
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("at most %d writes at once", maxConcurrent)
	if overlaps != 0 {
		t.Errorf("%d times a trace was in two batches being written at once", overlaps)
	}
}

// Every writer gets a share: traces spread over the writers.
func TestOwnerSpreads(t *testing.T) {
	for _, writers := range []int{2, 3, 4, 7} {
		counts := make([]int, writers)
		for i := uint64(1); i <= 10_000; i++ {
			counts[owner(i, writers)]++ // sequential IDs: the worst case for a plain modulo of a counter-like ID
		}
		for w, c := range counts {
			if c < 10_000/writers/2 {
				t.Errorf("%d writers: writer %d owns %d of 10000 traces", writers, w, c)
			}
		}
	}
}
