package pgstore

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/sqlpool/sqlpool/app/zipkin/model"
)

// TestCopyBinaryMatchesPgx checks that appendCopy encodes every value of a
// row as pgx's binary encoders encode copyValues for the columns' types, so
// that the hand-written COPY stores what pgx's CopyFrom stored.
func TestCopyBinaryMatchesPgx(t *testing.T) {
	oids := []uint32{pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID, pgtype.Int8OID, pgtype.TextOID,
		pgtype.TextOID, pgtype.Int8OID, pgtype.Int8OID, pgtype.BoolOID, pgtype.BoolOID, pgtype.TextOID, pgtype.InetOID,
		pgtype.InetOID, pgtype.Int4OID, pgtype.TextOID, pgtype.InetOID, pgtype.InetOID, pgtype.Int4OID, pgtype.JSONBOID,
		pgtype.JSONBOID, pgtype.TextArrayOID}
	if len(oids) != len(spanColumns) {
		t.Fatalf("%d types for %d columns", len(oids), len(spanColumns))
	}
	m := pgtype.NewMap()
	spans := makeSpans(rand.New(rand.NewPCG(3, 4)), 200)
	// Edge cases: no timestamp, no endpoints, no tags, debug, IPv6, an
	// IPv4-mapped address, escapes and long terms.
	spans = append(spans,
		model.Span{TraceID: model.TraceID{Low: 1}, ID: 2},
		model.Span{TraceID: model.TraceID{Low: 1}, ID: 3, Debug: true, Shared: true, Kind: model.KindServer, Name: "é\"\\",
			LocalEndpoint:  &model.Endpoint{ServiceName: "a", IPv6: netip.MustParseAddr("2001:db8::1"), Port: 65535},
			RemoteEndpoint: &model.Endpoint{IPv4: netip.MustParseAddr("127.0.0.1"), IPv6: netip.MustParseAddr("::ffff:10.0.0.1")},
			Annotations:    []model.Annotation{{Timestamp: -1, Value: "x\x01"}, {Timestamp: 1, Value: ""}},
			Tags:           map[string]string{"": "", "k": string(bytes.Repeat([]byte("v"), 2000)), "error": "\xff"}})
	for i := range spans {
		r, ok := buildRow(&spans[i])
		if !ok {
			t.Fatalf("span %d: not a row", i)
		}
		got := r.appendCopy(nil)
		if n := binary.BigEndian.Uint16(got); int(n) != len(spanColumns) {
			t.Fatalf("span %d: %d fields", i, n)
		}
		got = got[2:]
		for j, v := range r.copyValues() {
			want, err := m.Encode(oids[j], pgtype.BinaryFormatCode, v, make([]byte, 0, 8)) // as pgx's COPY: nil is NULL
			if err != nil {
				t.Fatalf("span %d, %s: pgx: %v", i, spanColumns[j], err)
			}
			n := int32(binary.BigEndian.Uint32(got))
			got = got[4:]
			if want == nil {
				if n != -1 {
					t.Fatalf("span %d, %s: length %d, want NULL", i, spanColumns[j], n)
				}
				continue
			}
			if int(n) != len(want) || !bytes.Equal(got[:n], want) {
				t.Fatalf("span %d, %s: %x, pgx encodes %x", i, spanColumns[j], got[:max(n, 0)], want)
			}
			got = got[n:]
		}
		if len(got) != 0 {
			t.Fatalf("span %d: %d bytes left", i, len(got))
		}
	}
	all := appendCopyRows(nil, nil)
	if !bytes.Equal(all, append(append([]byte(nil), copyHeader...), 0xff, 0xff)) || len(copyHeader) != 19 {
		t.Fatalf("empty stream %x", all)
	}
}
