//go:build unix

package fs

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/redact/redacttest"
	"github.com/wardenrt/warden/runtime/tool"
)

// cpuTime is the process's user and system CPU time: on a machine shared
// with other work, a steadier measure than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopCPU runs f b.N times and reports the CPU time per call as well.
func loopCPU(b *testing.B, f func()) {
	start := cpuTime()
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

func benchText(unit string, size int) []byte {
	return []byte(strings.Repeat(unit, size/len(unit)+1)[:size])
}

// BenchmarkFSRead reads a text file of 4 KiB and of 1 MiB, code without
// secrets and configuration with secrets: os.ReadFile as the baseline, and
// fs_read through the whole gate (decoding, schema, policy, capabilities
// with path resolution, os.Root access, the /proc check, masking of the
// output with ids kept in the run's vault, two audit events marshalled)
// with runtimetest.Audit, i.e. without the durable audit write.
func BenchmarkFSRead(b *testing.B) {
	ws, g, _ := testWS(b, testRO)
	for _, kind := range []struct{ name, unit string }{{"code", redacttest.Code}, {"env", redacttest.Env}} {
		for _, size := range []struct {
			name string
			n    int
		}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}} {
			content := benchText(kind.unit, size.n)
			file := kind.name + "-" + size.name + ".txt"
			name := filepath.Join(ws, file)
			if err := os.WriteFile(name, content, 0o644); err != nil {
				b.Fatal(err)
			}
			b.Run(kind.name+"-"+size.name+"/os.ReadFile", func(b *testing.B) {
				b.SetBytes(int64(len(content)))
				loopCPU(b, func() {
					data, err := os.ReadFile(name)
					if err != nil || len(data) != len(content) {
						b.Fatal(err)
					}
				})
			})
			b.Run(kind.name+"-"+size.name+"/fs_read", func(b *testing.B) {
				b.SetBytes(int64(len(content)))
				req := gate.Request{Tool: "fs_read", Args: json.RawMessage(`{"path":"` + file + `"}`), Principal: []string{"bench"}, Vault: tool.NewVault()}
				loopCPU(b, func() {
					res, err := g.Call(context.Background(), req)
					if err != nil || !res.Success || len(res.Output) == 0 {
						b.Fatal(err, res.Error)
					}
				})
			})
		}
	}
}
