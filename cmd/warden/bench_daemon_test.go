//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenrt/warden/runtime/schedule"
)

// BenchmarkDaemon measures the scheduler daemon (run it with
// -benchtime=1x; WARDEN_BENCH_IDLE sets the idle window, default 60s):
//
//   - idle-100-jobs: the daemon's CPU time while 100 jobs are scheduled and
//     none is due, as CPU milliseconds per hour of wall time;
//   - due-to-start: how late a job every second starts after its due time
//     (median and worst over the firings seen), its run included.
func BenchmarkDaemon(b *testing.B) {
	window := 60 * time.Second
	if v := os.Getenv("WARDEN_BENCH_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		window = d
	}
	b.Run("idle-100-jobs", func(b *testing.B) {
		w := newDaemonWorld(b)
		for i := range 100 {
			w.run("schedule", "add", fmt.Sprintf("job%03d", i), "--workflow", filepath.Join(w.ws, "tick.yaml"), "--every", "1h", "--yes")
		}
		d, _ := w.start("--poll", schedule.DefaultPoll.String()) // as a real daemon runs
		time.Sleep(2 * time.Second)                              // start-up done
		before := cpuTicks(b, d.Process.Pid)
		time.Sleep(window)
		used := cpuTicks(b, d.Process.Pid) - before
		d.Process.Signal(syscall.SIGTERM)
		d.Wait()
		ms := float64(used) * 10 // 100 ticks per second
		b.ReportMetric(ms*float64(time.Hour)/float64(window), "cpu-ms/hour")
		b.ReportMetric(window.Seconds(), "window-s")
	})
	b.Run("due-to-start", func(b *testing.B) {
		w := newDaemonWorld(b)
		w.run("schedule", "add", "tick", "--workflow", filepath.Join(w.ws, "tick.yaml"), "--every", "1s", "--yes")
		d, _ := w.start()
		var lat []time.Duration
		seen := map[string]bool{}
		deadline := time.Now().Add(15 * time.Second)
		for len(lat) < 10 && time.Now().Before(deadline) {
			j := w.job("tick")
			if l := j.Last; l != nil && l.RunID != "" && !seen[l.RunID] {
				seen[l.RunID] = true
				lat = append(lat, l.Started.Sub(l.Fire))
			}
			time.Sleep(200 * time.Millisecond)
		}
		d.Process.Signal(syscall.SIGTERM)
		d.Wait()
		if len(lat) == 0 {
			b.Fatal("no run seen")
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "median-ms")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
		b.ReportMetric(float64(len(lat)), "firings")
	})
}

// cpuTicks is a process's user + system time in clock ticks.
func cpuTicks(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}
