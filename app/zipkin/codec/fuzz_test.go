package codec

import (
	"bytes"
	"reflect"
	"strconv"
	"testing"
)

// The fuzz targets check that no input panics a decoder and that whatever
// decodes re-encodes to something that decodes to the same spans. Run
// them by hand, e.g. go test -run '^$' -fuzz FuzzDecodeJSONV2 -fuzztime 60s.

func FuzzDecodeJSONV2(f *testing.F) {
	f.Add([]byte(zipkinGoBody))
	f.Add([]byte(otelBody))
	f.Add([]byte(`[{"traceId":"1","id":"2","tags":{"a":null},"annotations":[{"timestamp":1}]},{"traceId":"a","id":"b","name":"\u00e9\ud83d\ude00"}]`))
	f.Add([]byte(`[1,{},null,"x",[]]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		spans, _ := DecodeJSONV2(data)
		enc := AppendJSONV2Spans(nil, spans)
		again, err := DecodeJSONV2(enc)
		if err != nil {
			t.Fatalf("re-decoding our own output %s: %v", enc, err)
		}
		if enc2 := AppendJSONV2Spans(nil, again); !bytes.Equal(enc, enc2) {
			t.Fatalf("not stable:\n%s\n%s", enc, enc2)
		}
	})
}

func FuzzDecodeJSONV1(f *testing.F) {
	f.Add([]byte(`[{"traceId":"1","id":"2","timestamp":10,"duration":5,"annotations":[{"timestamp":10,"value":"cs","endpoint":{"serviceName":"a"}},{"timestamp":11,"value":"sr","endpoint":{"serviceName":"b"}}],"binaryAnnotations":[{"key":"sa","value":true,"endpoint":{"serviceName":"b"}},{"key":"lc","value":"","endpoint":{"serviceName":"a"}}]}]`))
	f.Add([]byte(`[{"traceId":"1","id":"2","binaryAnnotations":[{"key":"ca","value":true,"endpoint":{"serviceName":"c"}}]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		spans, _ := DecodeJSONV1(data)
		enc := AppendJSONV2Spans(nil, spans)
		if _, err := DecodeJSONV2(enc); err != nil {
			t.Fatalf("re-decoding converted spans %s: %v", enc, err)
		}
	})
}

func FuzzDecodeProto3(f *testing.F) {
	f.Add(AppendProto3Spans(nil, realisticSpans(2)))
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		spans, _ := DecodeProto3(data)
		enc := AppendProto3Spans(nil, spans)
		again, err := DecodeProto3(enc)
		if err != nil {
			t.Fatalf("re-decoding our own output: %v", err)
		}
		if !reflect.DeepEqual(spans, again) && !(len(spans) == 0 && len(again) == 0) {
			t.Fatalf("not stable:\n%+v\n%+v", spans, again)
		}
	})
}

// FuzzSmallInt checks readLong's fast path against strconv.ParseInt.
func FuzzSmallInt(f *testing.F) {
	for _, s := range []string{"0", "-0", "007", "-", "", "+1", "123456789012345678", "-999999999999999999", "1234567890123456789", "1e3", " 1", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, ok := smallInt(s)
		if !ok {
			return
		}
		want, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v != want {
			t.Fatalf("smallInt(%q) = %d; strconv: %d, %v", s, v, want, err)
		}
	})
}
