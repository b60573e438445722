package server

import (
	"math"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// sampler is Zipkin's CollectorSampler: a trace is kept when its debug flag
// is set or when |low 64 bits of the trace ID, as a signed long| ≤ rate ×
// MaxInt64, so that every span of a trace gets the same decision.
type sampler struct {
	all      bool
	boundary int64
}

func newSampler(rate float64) sampler {
	switch {
	case rate == 0 || rate >= 1:
		return sampler{all: true}
	case rate < 0:
		return sampler{boundary: 0}
	}
	return sampler{boundary: int64(float64(math.MaxInt64) * rate)}
}

func (s sampler) keep(sp *model.Span) bool {
	if s.all || sp.Debug {
		return true
	}
	t := int64(sp.TraceID.Low)
	switch {
	case t == math.MinInt64:
		t = math.MaxInt64
	case t < 0:
		t = -t
	}
	return t <= s.boundary
}

// filter returns the kept spans, reusing spans' array.
func (s sampler) filter(spans []model.Span) []model.Span {
	if s.all {
		return spans
	}
	kept := spans[:0]
	for i := range spans {
		if s.keep(&spans[i]) {
			kept = append(kept, spans[i])
		}
	}
	return kept
}
