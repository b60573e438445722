package mysqlstore

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// FuzzDecodeDepRows: the dependency queue's encoded rows decode to what appendDepRows encoded
// (rows generated from the fuzzer's seed), and arbitrary bytes decode to rows or errDepRows,
// never a panic.
func FuzzDecodeDepRows(f *testing.F) {
	f.Add(uint64(1), []byte{})
	f.Add(uint64(2), []byte{1, 2, 3, 0x80})
	f.Add(uint64(3), []byte{1, 0, 0, 0, 0, 0, 5, 'a'})
	f.Fuzz(func(t *testing.T, seed uint64, junk []byte) {
		r := rand.New(rand.NewPCG(seed, 11))
		rows := make([]*depRow, r.IntN(6))
		str := func() string {
			b := make([]byte, r.IntN(300))
			for i := range b {
				b[i] = byte(r.Uint32())
			}
			return string(b)
		}
		for i := range rows {
			d := &depRow{ann: r.IntN(2) == 0, shared: r.IntN(2) == 0, high: int64(r.Uint64()), low: int64(r.Uint64()),
				id: int64(r.Uint64()), ts: int64(r.Uint64())}
			if d.ann {
				d.shared, d.aType, d.key, d.service = false, int64(r.Uint64()), str(), str()
			} else {
				d.parent = int64(r.Uint64())
			}
			rows[i] = d
		}
		got, err := decodeDepRows(appendDepRows(nil, rows), nil)
		if err != nil {
			t.Fatalf("decoding %d encoded rows: %v", len(rows), err)
		}
		want := make([]depRow, len(rows))
		for i, d := range rows {
			want[i] = *d
		}
		if len(got) != 0 || len(want) != 0 {
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %+v; encoded %+v", got, want)
			}
		}
		if out, err := decodeDepRows(junk, nil); err != nil && err != errDepRows {
			t.Fatalf("junk: %v", err)
		} else if err == nil && len(out) > len(junk) {
			t.Fatalf("%d rows from %d bytes", len(out), len(junk))
		}
		_ = newDepTrace(1).readRecord(append([]byte{recordV2}, junk...), "2026-12-05")

		// A record: the hour, the links and the rows read back as written.
		links := make([]model.DependencyLink, r.IntN(4))
		for i := range links {
			links[i] = model.DependencyLink{Parent: str(), Child: str(), CallCount: int64(r.Uint64()), ErrorCount: int64(r.Uint64())}
		}
		hour := int64(r.IntN(1<<20)) - 1
		tr := newDepTrace(7)
		if err := tr.readRecord(encodeRecordV2("", hour, links, rows), "2026-12-05"); err != nil {
			t.Fatalf("reading a record of %d links and %d rows: %v", len(links), len(rows), err)
		}
		if tr.oldHour != hour || len(tr.oldLink) != len(links) {
			t.Fatalf("record read back as hour %d with %d links; written hour %d, %d links", tr.oldHour, len(tr.oldLink), hour, len(links))
		}
		for i, l := range links {
			if o := tr.oldLink[i]; o != (depLinkRow{l.Parent, l.Child, l.CallCount, l.ErrorCount}) {
				t.Fatalf("link %d read back as %+v; written %+v", i, o, l)
			}
		}
	})
}
