package kafka

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sqlpool/sqlpool/app/zipkin/collector"
	"github.com/sqlpool/sqlpool/app/zipkin/server"
)

// tp names a partition.
type tp struct {
	topic string
	part  int32
}

// worker is one stream: a client in the group and its partitions' offset
// trackers.
type worker struct {
	c      *Collector
	id     int
	cl     *kgo.Client
	killed atomic.Bool

	mu    sync.Mutex
	parts map[tp]*partition // the partitions being consumed, by this session
}

// partition tracks the records of one partition handed to the queue, in
// offset order, and marks for commit the offset after the longest prefix
// of completed ones.
type partition struct {
	w   *worker
	key tp

	mu      sync.Mutex
	gone    bool     // revoked or lost: completions no longer mark
	pending []record // in offset order; a done head is popped
}

type record struct {
	offset int64
	epoch  int32
	done   bool
}

func (w *worker) run() {
	defer w.c.wg.Done()
	ctx := w.c.ctx
	for {
		fetches := w.cl.PollRecords(ctx, DefaultPollRecords)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				w.c.log.Warn("kafka fetch error", "topic", topic, "partition", p, "err", err.Error())
			}
		})
		stopped := false
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			if stopped || len(fp.Records) == 0 {
				return
			}
			p := w.partition(fp.Topic, fp.Partition)
			for _, r := range fp.Records {
				if !w.handle(ctx, p, r) {
					stopped = true
					return
				}
			}
		})
		if stopped {
			return
		}
	}
}

// handle hands one record to the queue; false means the collector is
// stopping and the record was not taken (it is not marked).
func (w *worker) handle(ctx context.Context, p *partition, r *kgo.Record) bool {
	i := p.add(r)
	w.c.inflight.Add(1)
	completed := func(err error) {
		defer w.c.inflight.Done()
		if errors.Is(err, server.ErrAbandoned) {
			return // not stored: leave it uncommitted, to be read again
		}
		p.complete(i)
	}
	switch w.c.handler.Handle(ctx, r.Value, collector.Where(r.Topic, r.Partition, r.Offset), completed) {
	case collector.Skipped:
		completed(nil)
	case collector.Stopped:
		w.c.inflight.Done()
		return false
	}
	return true
}

func (w *worker) partition(topic string, part int32) *partition {
	k := tp{topic, part}
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.parts[k]
	if p == nil {
		p = &partition{w: w, key: k}
		w.parts[k] = p
	}
	return p
}

// add appends r to the pending records and returns its offset.
func (p *partition) add(r *kgo.Record) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending = append(p.pending, record{offset: r.Offset, epoch: r.LeaderEpoch})
	return r.Offset
}

// complete marks the record at offset done and, when that extends the
// completed prefix, marks the offset after it for commit.
func (p *partition) complete(offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i, ok := slices.BinarySearchFunc(p.pending, offset, func(r record, o int64) int { return cmp.Compare(r.offset, o) }); ok {
		p.pending[i].done = true
	}
	n := 0
	for n < len(p.pending) && p.pending[n].done {
		n++
	}
	if n == 0 {
		return
	}
	last := p.pending[n-1]
	p.pending = append(p.pending[:0], p.pending[n:]...)
	if p.gone || p.w.killed.Load() {
		return
	}
	p.w.cl.MarkCommitOffsets(map[string]map[int32]kgo.EpochOffset{
		p.key.topic: {p.key.part: {Epoch: last.epoch, Offset: last.offset + 1}},
	})
}

// revoked commits what is marked and forgets the revoked partitions:
// completions arriving later do not mark (the records are read again by
// their new owner; the store's writes are idempotent).
func (w *worker) revoked(ctx context.Context, cl *kgo.Client, parts map[string][]int32) {
	w.forget(parts)
	if w.killed.Load() {
		return
	}
	if err := cl.CommitMarkedOffsets(ctx); err != nil {
		w.c.log.Warn("kafka: committing offsets of revoked partitions", "err", err.Error())
	}
}

// lost forgets the partitions; a commit would fail.
func (w *worker) lost(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	w.forget(parts)
}

func (w *worker) forget(parts map[string][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for topic, ps := range parts {
		for _, part := range ps {
			k := tp{topic, part}
			if p := w.parts[k]; p != nil {
				p.mu.Lock()
				p.gone = true
				p.mu.Unlock()
				delete(w.parts, k)
			}
		}
	}
}
