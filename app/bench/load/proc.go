package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/PID/stat; it is
// 100 on every Linux this runs on.
const clockTicks = 100

// procCPU returns the user+system CPU time of pid from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads fields 14 and 15 (utime, stime) of a /proc/PID/stat
// line; the command name (field 2) may contain spaces, so fields are
// counted after its closing parenthesis.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc stat: %.60q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime is field 14 → f[11], stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat: %.60q", stat)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad utime/stime in /proc stat: %q %q", f[11], f[12])
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}

// procRSS returns VmRSS of pid in bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusRSS(string(b))
}

func parseStatusRSS(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("unexpected VmRSS line %q", line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc status")
}

// loadAvg returns the 1-minute load average.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	v, _ := parseLoadAvg(string(b))
	return v
}

func parseLoadAvg(s string) (float64, error) {
	f := strings.Fields(s)
	if len(f) < 1 {
		return 0, fmt.Errorf("empty loadavg")
	}
	return strconv.ParseFloat(f[0], 64)
}

// procWatch samples a process during a step: CPU used over the step and
// the largest RSS seen (sampled every 250 ms), plus the largest 1-minute
// load average.
type procWatch struct {
	pid    int
	cpu0   time.Duration
	t0     time.Time
	stop   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	maxRSS int64
	maxLd  float64
}

func watchProc(pid int) *procWatch {
	w := &procWatch{pid: pid, t0: time.Now(), stop: make(chan struct{})}
	w.cpu0, _ = procCPU(pid)
	w.sample()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.sample()
			}
		}
	}()
	return w
}

func (w *procWatch) sample() {
	rss, _ := procRSS(w.pid)
	ld := loadAvg()
	w.mu.Lock()
	w.maxRSS = max(w.maxRSS, rss)
	w.maxLd = max(w.maxLd, ld)
	w.mu.Unlock()
}

// ProcStats is what a procWatch measured.
type ProcStats struct {
	CPUPercent float64 `json:"cpu_percent"` // of one core, over the step
	MaxRSSMiB  float64 `json:"max_rss_mib"`
	MaxLoad1   float64 `json:"max_load1"`
}

func (w *procWatch) end() ProcStats {
	close(w.stop)
	w.wg.Wait()
	w.sample()
	cpu, _ := procCPU(w.pid)
	el := time.Since(w.t0)
	return ProcStats{
		CPUPercent: float64(cpu-w.cpu0) / float64(el) * 100,
		MaxRSSMiB:  float64(w.maxRSS) / (1 << 20),
		MaxLoad1:   w.maxLd,
	}
}
