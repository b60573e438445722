package server

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// postWait is how long a message waits for a decoding slot before it is
// refused (RetryLater).
const postWait = time.Second

// receiveBody reads the request body, bounded by maxBody, into a buffer
// that grows with what arrives (never to the announced Content-Length in
// one step). The bytes held are reserved from the budget of body bytes
// being received (Config.MaxReceivingBytes) as the buffer grows, so that a
// client that announces a large body and stalls holds only what it sent;
// when the budget is spent the answer is 503. A body must arrive within
// bodyTimeout, else 408. release gives the reservation back; call it once
// the body is no longer needed. A non-zero code is the error to answer.
func (s *Server) receiveBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), code int, msg string) {
	var held int64
	release = func() {
		if held > 0 {
			s.receiving.Add(-held)
			held = 0
		}
	}
	limit := s.ingest.maxBody
	tooLarge := "Request Entity Too Large: the body is larger than " + strconv.FormatInt(limit, 10) + " bytes"
	if r.ContentLength > limit {
		return nil, release, http.StatusRequestEntityTooLarge, tooLarge
	}
	// (A ResponseWriter without deadlines, as in tests that call the
	// handler directly, reads without one.) The deadline is lifted once
	// the body is read; after an error it stays, so that the HTTP server's
	// discarding of the unread body fails fast and closes the connection
	// instead of waiting on the client.
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(s.ingest.bodyTimeout)) == nil
	rd := http.MaxBytesReader(w, r.Body, limit)
	var buf []byte
	var err error
	for {
		if len(buf) == cap(buf) {
			grow := int64(min(max(cap(buf), minReceiveChunk), maxReceiveChunk))
			if r.ContentLength >= 0 && int64(cap(buf)) >= r.ContentLength {
				grow = minReceiveChunk // room to see EOF (or a body longer than announced)
			}
			if !reserveUpTo(&s.receiving, grow, s.ingest.maxReceiving) {
				return nil, release, http.StatusServiceUnavailable, "Too many span bytes are being received; retry later"
			}
			held += grow
			nb := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(nb, buf)
			buf = nb
		}
		var n int
		n, err = rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			break
		}
	}
	if err == io.EOF {
		err = nil
	}
	if err == nil && deadline {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, release, http.StatusRequestEntityTooLarge, tooLarge
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, release, http.StatusRequestTimeout, "Request Timeout: the body did not arrive within " + s.ingest.bodyTimeout.String()
		}
		return nil, release, http.StatusBadRequest, "Cannot read the request body: " + err.Error()
	}
	return buf, release, 0, ""
}

// Growth steps of receiveBody's buffer: it starts at minReceiveChunk and
// doubles up to steps of maxReceiveChunk.
const (
	minReceiveChunk = 512
	maxReceiveChunk = 1 << 20
)

// gunzip returns body inflated when Content-Encoding says gzip, bounded by
// maxBody (a gzip bomb is a 413), else body itself. A non-zero code is the
// error to answer.
func (s *Server) gunzip(r *http.Request, body []byte) ([]byte, int, string) {
	limit := s.ingest.maxBody
	if len(body) == 0 || !strings.Contains(strings.ToLower(r.Header.Get("Content-Encoding")), "gzip") {
		return body, 0, ""
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, http.StatusBadRequest, "Cannot gunzip spans"
	}
	var out bytes.Buffer
	out.Grow(min(4*len(body), int(limit)+1))
	n, err := out.ReadFrom(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, http.StatusBadRequest, "Cannot gunzip spans"
	}
	if n > limit {
		return nil, http.StatusRequestEntityTooLarge, "Request Entity Too Large: the body is larger than " + strconv.FormatInt(limit, 10) + " bytes after gunzip"
	}
	return out.Bytes(), 0, ""
}

// isEmptyList reports whether body is a JSON empty list, "[]" with optional
// white space.
func isEmptyList(body []byte) bool {
	t := bytes.TrimSpace(body)
	if len(t) < 2 || t[0] != '[' || t[len(t)-1] != ']' {
		return false
	}
	return len(bytes.TrimSpace(t[1:len(t)-1])) == 0
}
