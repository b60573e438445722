package pgstore

import (
	"encoding/binary"
	"net/netip"
)

// The rows of a COPY are encoded here, in PostgreSQL's binary COPY format,
// into one buffer that is sent as it is (pgconn's CopyFrom). pgx's CopyFrom
// takes each row as []any and plans the encoding of every value of every
// row through its type map: a third of the span server's client-side cost
// of a write. The bytes are the ones pgx sends for copyValues
// (TestCopyBinaryMatchesPgx checks them value by value against pgx's
// encoders), so PostgreSQL stores the same rows.

// copyHeader starts a binary COPY: the signature, flags 0, no extension.
var copyHeader = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

// Type OIDs the binary array format names.
const oidText = 25

// appendCopyRows appends the binary COPY stream of rows (header, rows,
// trailer) to b.
func appendCopyRows(b []byte, rows []spanRow) []byte {
	b = append(b, copyHeader...)
	for i := range rows {
		b = rows[i].appendCopy(b)
	}
	return binary.BigEndian.AppendUint16(b, 0xffff) // trailer: -1
}

// appendCopy appends the row in binary COPY format: the field count, then
// each field as its length (-1: NULL) and bytes, in spanColumns' order.
func (r *spanRow) appendCopy(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(spanColumns)))
	b = copyInt8(b, r.low)
	b = copyInt8(b, r.high)
	b = copyInt8(b, r.id)
	b = copyInt8(b, r.frag)
	b = copyInt8(b, r.parent)
	b = copyText(b, r.kind)
	b = copyText(b, r.name)
	if r.ts == 0 {
		b = copyNull(b)
	} else {
		b = copyInt8(b, r.ts)
	}
	b = copyInt8(b, r.dur)
	b = copyBool(b, r.debug)
	b = copyBool(b, r.shared)
	b = copyText(b, r.lsvc)
	b = copyInet(b, r.l4)
	b = copyInet(b, r.l6)
	b = copyInt4(b, r.lport)
	b = copyText(b, r.rsvc)
	b = copyInet(b, r.r4)
	b = copyInet(b, r.r6)
	b = copyInt4(b, r.rport)
	b = copyJSONB(b, r.ann)
	b = copyJSONB(b, r.tags)
	return copyTextArray(b, r.terms)
}

func copyLen(b []byte, n int) []byte { return binary.BigEndian.AppendUint32(b, uint32(int32(n))) }

func copyNull(b []byte) []byte { return copyLen(b, -1) }

func copyInt8(b []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(copyLen(b, 8), uint64(v))
}

func copyInt4(b []byte, v int32) []byte {
	return binary.BigEndian.AppendUint32(copyLen(b, 4), uint32(v))
}

func copyBool(b []byte, v bool) []byte {
	if v {
		return append(copyLen(b, 1), 1)
	}
	return append(copyLen(b, 1), 0)
}

func copyText(b []byte, s string) []byte {
	return append(copyLen(b, len(s)), s...)
}

// copyInet is an address as an inet of its full length (as pgx encodes
// netip.PrefixFrom(a, a.BitLen())): family (2 IPv4, 3 IPv6), bits, is_cidr
// 0, address length and bytes; NULL when a is not valid.
func copyInet(b []byte, a netip.Addr) []byte {
	if !a.IsValid() {
		return copyNull(b)
	}
	if a.Is4() {
		v := a.As4()
		b = append(copyLen(b, 8), 2, 32, 0, 4)
		return append(b, v[:]...)
	}
	v := a.As16()
	b = append(copyLen(b, 20), 3, byte(a.BitLen()), 0, 16)
	return append(b, v[:]...)
}

// copyJSONB is JSON text as jsonb (version 1, then the text); NULL for nil.
func copyJSONB(b []byte, j []byte) []byte {
	if j == nil {
		return copyNull(b)
	}
	b = append(copyLen(b, 1+len(j)), 1)
	return append(b, j...)
}

// copyTextArray is a one-dimensional text[] (lower bound 1; an empty one
// with a dimension of length 0, as pgx sends it), never NULL.
func copyTextArray(b []byte, terms []string) []byte {
	n := 20
	for _, t := range terms {
		n += 4 + len(t)
	}
	b = copyLen(b, n)
	b = binary.BigEndian.AppendUint32(b, 1) // dimensions
	b = binary.BigEndian.AppendUint32(b, 0) // no NULLs
	b = binary.BigEndian.AppendUint32(b, oidText)
	b = binary.BigEndian.AppendUint32(b, uint32(len(terms)))
	b = binary.BigEndian.AppendUint32(b, 1) // lower bound
	for _, t := range terms {
		b = copyText(b, t)
	}
	return b
}
