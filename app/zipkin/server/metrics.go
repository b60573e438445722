package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sqlpool/sqlpool/app/zipkin/spool"
)

// Metric names. The zipkin_collector_* counters and gauges are Zipkin's own
// (Micrometer's zipkin_collector.* with the tag transport="http", as Zipkin's
// Prometheus endpoint shows them); the others are this server's additions
// for the bounded queue and its writers. docs/server.md describes each.
const (
	NameMessages        = "zipkin_collector_messages_total"
	NameMessagesDropped = "zipkin_collector_messages_dropped_total"
	NameBytes           = "zipkin_collector_bytes_total"
	NameSpans           = "zipkin_collector_spans_total"
	NameSpansDropped    = "zipkin_collector_spans_dropped_total"
	NameMessageSpans    = "zipkin_collector_message_spans"
	NameMessageBytes    = "zipkin_collector_message_bytes"

	NameMessagesRejected = "zipkin_collector_messages_rejected_total"
	NameQueueSpans       = "zipkin_collector_queue_spans"
	NameQueueBytes       = "zipkin_collector_queue_bytes"
	NameQueueMaxSpans    = "zipkin_collector_queue_max_spans"
	NameQueueMaxBytes    = "zipkin_collector_queue_max_bytes"
	NameSpansStored      = "zipkin_collector_spans_stored_total"
	NameWrites           = "zipkin_collector_writes_total"
	NameWriteSeconds     = "zipkin_collector_write_seconds"
	NameBatchesFailed    = "zipkin_collector_batches_failed_total"

	// The spool's (Config.SpoolDir).
	NameSpoolBytes    = "zipkin_spool_bytes"
	NameSpoolRecords  = "zipkin_spool_records"
	NameSpoolReplayed = "zipkin_spool_replayed_total"
	NameSpoolCorrupt  = "zipkin_spool_corrupt_bytes_total"
	NameSpoolFsyncs   = "zipkin_spool_fsyncs_total"
	NameSpoolOldest   = "zipkin_spool_oldest_unstored_seconds"
	NameSpoolFsyncSec = "zipkin_spool_fsync_seconds"
)

// collectorMetrics holds the collector's metric handles. Every update is an
// atomic operation of client_golang; none takes a lock.
type collectorMetrics struct {
	messages, messagesDropped, messagesRejected prometheus.Counter
	bytes, spans, spansDropped, spansStored     prometheus.Counter
	messageSpans, messageBytes                  prometheus.Gauge
	writes                                      *prometheus.CounterVec
	writeSeconds                                prometheus.Histogram
	batchesFailed                               prometheus.Counter

	all        []prometheus.Collector // every handle: what the "http" transport registers
	perMessage []prometheus.Collector // the per-message counters and gauges: what other transports register
}

// newCollectorMetrics returns the handles of the span endpoints of this
// package (transport="http"), which also count the shared queue's writes.
func newCollectorMetrics() *collectorMetrics { return newTransportMetrics("http") }

// newTransportMetrics returns the handles of one transport (label
// transport=name); Server.Transport registers the per-message ones of the
// other collectors.
func newTransportMetrics(name string) *collectorMetrics {
	http := prometheus.Labels{"transport": name}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: http})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: http})
	}
	m := &collectorMetrics{
		messages:         counter(NameMessages, "POST requests received on the span endpoints."),
		messagesDropped:  counter(NameMessagesDropped, "POST requests answered with an error (400, 413, 500): nothing of them was stored."),
		messagesRejected: counter(NameMessagesRejected, "POST requests refused with 503 because the ingest queue was full or the server was stopping."),
		bytes:            counter(NameBytes, "Bytes of span bodies received (after gunzip)."),
		spans:            counter(NameSpans, "Spans decoded from accepted and rejected POSTs."),
		spansDropped:     counter(NameSpansDropped, "Decoded spans not stored: sampled out, refused with 503, or in a batch whose writes failed until the retry deadline."),
		spansStored:      counter(NameSpansStored, "Spans written to storage."),
		messageSpans:     gauge(NameMessageSpans, "Spans in the last POST."),
		messageBytes:     gauge(NameMessageBytes, "Bytes in the last POST (after gunzip)."),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameWrites, ConstLabels: http,
			Help: "Storage write attempts of batches, by result (ok, error)."}, []string{"result"}),
		writeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: NameWriteSeconds, ConstLabels: http,
			Help:    "Time of one storage write attempt of a batch.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}),
		batchesFailed: counter(NameBatchesFailed, "Batches given up after the retry deadline or at the end of a drain; their spans are logged and counted in spans_dropped."),
	}
	m.perMessage = []prometheus.Collector{m.messages, m.messagesDropped, m.messagesRejected, m.bytes, m.spans,
		m.spansDropped, m.messageSpans, m.messageBytes}
	m.all = append(append([]prometheus.Collector{}, m.perMessage...), m.spansStored, m.writes, m.writeSeconds, m.batchesFailed)
	m.writes.WithLabelValues("ok")
	m.writes.WithLabelValues("error")
	return m
}

// queueGauges reads the queue's depth and bounds at scrape.
func queueGauges(q *ingestQueue) []prometheus.Collector {
	http := prometheus.Labels{"transport": "http"}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: NameQueueSpans, ConstLabels: http,
			Help: "Spans accepted (answered 202) and not yet stored or given up: queued or being written."},
			func() float64 { return float64(q.spans.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: NameQueueBytes, ConstLabels: http,
			Help: "Decoded body bytes of the spans counted in zipkin_collector_queue_spans."},
			func() float64 { return float64(q.bytes.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: NameQueueMaxSpans, ConstLabels: http,
			Help: "The ingest queue's bound in spans."},
			func() float64 { return float64(q.cfg.maxSpans) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: NameQueueMaxBytes, ConstLabels: http,
			Help: "The ingest queue's bound in bytes."},
			func() float64 { return float64(q.cfg.maxBytes) }),
	}
}

// spoolGauges are the spool's metrics (Config.SpoolDir).
func spoolGauges(sp *spool.Spool) []prometheus.Collector {
	http := prometheus.Labels{"transport": "http"}
	g := func(name, help string, f func(st spool.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, ConstLabels: http, Help: help},
			func() float64 { return f(sp.Stats()) })
	}
	c := func(name, help string, f func(st spool.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, ConstLabels: http, Help: help},
			func() float64 { return f(sp.Stats()) })
	}
	return []prometheus.Collector{
		g(NameSpoolBytes, "Bytes of the spool's segments on disk.", func(st spool.Stats) float64 { return float64(st.Bytes) }),
		g(NameSpoolRecords, "Requests in the spool whose spans are not yet stored.", func(st spool.Stats) float64 { return float64(st.Records) }),
		c(NameSpoolReplayed, "Requests replayed from the spool at start.", func(st spool.Stats) float64 { return float64(st.Replayed) }),
		c(NameSpoolCorrupt, "Bytes of corrupt or truncated spool tails cut at start (their requests are lost).", func(st spool.Stats) float64 { return float64(st.CorruptBytes) }),
		c(NameSpoolFsyncs, "Group commits of the spool (one fsync each).", func(st spool.Stats) float64 { return float64(st.Fsyncs) }),
		g(NameSpoolOldest, "Age of the oldest request in the spool not yet stored, in seconds; 0 when none.", func(st spool.Stats) float64 {
			if st.Oldest.IsZero() {
				return 0
			}
			return time.Since(st.Oldest).Seconds()
		}),
		&fsyncHistogram{sp: sp, desc: prometheus.NewDesc(NameSpoolFsyncSec,
			"Time of each group commit's fdatasync, in seconds: the disk's part of a 202's wait.", nil, http)},
	}
}

// fsyncHistogram exports spool.Stats' fdatasync counts as a histogram.
type fsyncHistogram struct {
	sp   *spool.Spool
	desc *prometheus.Desc
}

func (h *fsyncHistogram) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

func (h *fsyncHistogram) Collect(ch chan<- prometheus.Metric) {
	st := h.sp.Stats()
	buckets := make(map[float64]uint64, len(spool.FsyncBounds))
	var n uint64
	for i, b := range spool.FsyncBounds {
		n += uint64(st.FsyncCounts[i])
		buckets[b.Seconds()] = n
	}
	n += uint64(st.FsyncCounts[len(spool.FsyncBounds)])
	ch <- prometheus.MustNewConstHistogram(h.desc, n, st.FsyncTotal.Seconds(), buckets)
}
