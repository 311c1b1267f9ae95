//go:build unix

package redact

import (
	"github.com/wardenrt/warden/runtime/redact/redacttest"
	"strings"
	"syscall"
	"testing"
	"time"
)

func repeatTo(unit string, size int) string {
	return strings.Repeat(unit, size/len(unit)+1)[:size]
}

// BenchmarkStages times each stage of a Replace over the texts fs_read
// reads most (code, configuration) and typical tool output: the whole
// Replace, the anchors' scan, the rules given the scan's candidates
// (findPatterns less the scan), the key-value rule alone, the encoded
// runs, and the masks already in the text.
func BenchmarkStages(b *testing.B) {
	named := func(kind, _ string, _ int) string { return FormatMask(kind, "3f9a") }
	texts := []struct{ name, text string }{
		{"code-4KiB", repeatTo(redacttest.Code, 4<<10)}, {"code-1MiB", repeatTo(redacttest.Code, 1<<20)},
		{"env-4KiB", repeatTo(redacttest.Env, 4<<10)}, {"typical-1MiB", typicalText(1 << 20)},
	}
	kv := len(rules) - 1
	for _, t := range texts {
		s := t.text
		stage := func(name string, f func()) {
			b.Run(t.name+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(s)))
				start := cpuTime()
				for b.Loop() {
					f()
				}
				b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
			})
		}
		stage("Replace", func() { plain.Replace(s, named) })
		stage("findPatterns", func() { findPatterns(s) })
		stage("scan", func() { rulesScanner().scan(s).put() })
		stage("keyValues", func() {
			c := rulesScanner().scan(s)
			findKeyValues(s, c.byRule[kv])
			c.put()
		})
		stage("appendEncoded", func() { plain.appendEncoded(nil, s, 0) })
		stage("existingMasks", func() { existingMasks(s) })
	}
}

// cpuTime is the process's user and system CPU time: on a machine shared
// with other work, a steadier measure than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
