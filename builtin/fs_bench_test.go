package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/wardenrt/warden/runtime"
)

// BenchmarkFSRead reads a 4 KiB text file: os.ReadFile as the baseline, and
// fs_read through the whole gate (decoding, schema, policy, capabilities
// with path resolution, os.Root access, the /proc check, redaction of the
// output, two audit events marshalled) with memAudit, i.e. without the
// durable audit write.
func BenchmarkFSRead(b *testing.B) {
	ws, g, _ := fsTestWS(b, fsTestRO)
	content := bytes.Repeat([]byte("warden fs_read benchmark line\n"), 4096/30+1)[:4096]
	name := filepath.Join(ws, "bench.txt")
	if err := os.WriteFile(name, content, 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("os.ReadFile", func(b *testing.B) {
		b.SetBytes(int64(len(content)))
		for b.Loop() {
			data, err := os.ReadFile(name)
			if err != nil || len(data) != len(content) {
				b.Fatal(err)
			}
		}
	})
	b.Run("gate", func(b *testing.B) {
		b.SetBytes(int64(len(content)))
		req := runtime.Request{Tool: "fs_read", Args: json.RawMessage(`{"path":"bench.txt"}`), Principal: []string{"bench"}}
		for b.Loop() {
			res, err := g.Call(context.Background(), req)
			if err != nil || !res.Success || len(res.Output) != len(content) {
				b.Fatal(err, res.Error)
			}
		}
	})
}
