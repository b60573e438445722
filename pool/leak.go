package pool

import (
	"runtime"
	"strconv"
	"strings"
	"time"
)

// leakTask reports a connection held longer than LeakDetectionThreshold: one warning with the
// borrower's stack when the threshold passes, and an info line if the connection comes back.
type leakTask struct {
	timer *time.Timer
	pcs   []uintptr
}

func (p *Pool) watchLeak(e *entry) *leakTask {
	lt := &leakTask{pcs: make([]uintptr, 32)}
	lt.pcs = lt.pcs[:runtime.Callers(3, lt.pcs)]
	id := e.id
	lt.timer = time.AfterFunc(p.cfg.LeakDetectionThreshold, func() {
		p.cfg.Logger.Warn("sqlpool: connection leak detection triggered: a connection has been held longer than LeakDetectionThreshold; the stack shows where it was acquired",
			"pool", p.cfg.Name, "conn", id, "threshold", p.cfg.LeakDetectionThreshold, "stack", formatStack(lt.pcs))
	})
	return lt
}

// stop ends the watch at release; if the leak was reported, it logs that the connection is back.
func (lt *leakTask) stop(p *Pool, e *entry) {
	if lt.timer.Stop() {
		return // never reported
	}
	p.cfg.Logger.Info("sqlpool: previously reported leaked connection was returned",
		"pool", p.cfg.Name, "conn", e.id, "held", time.Duration(p.nanotime()-e.borrowedAt).Round(time.Millisecond))
}

func formatStack(pcs []uintptr) string {
	var b strings.Builder
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "database/sql.") {
			if !more {
				break
			}
			continue
		}
		b.WriteString(f.Function)
		b.WriteString("\n\t")
		b.WriteString(f.File)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(f.Line))
		b.WriteByte('\n')
		if !more {
			break
		}
	}
	return b.String()
}
