package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/runtime/gate"
)

// BenchmarkMCPRoundTrip (issue 7): `system get_info` as an MCP client sees
// it — a tools/call round trip over stdio to a `warden mcp serve`
// subprocess — next to the same call through `warden call` in-process
// (start-up: store, policy, registry, gate; then the call), and through the
// gate alone (what both share). Each reports its median and p99 per call.
func BenchmarkMCPRoundTrip(b *testing.B) {
	if testing.Short() {
		b.Skip("builds warden; skipped with -short")
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "warden")
	goBuild(b, bin, ".")
	ws := filepath.Join(dir, "ws")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		b.Fatal(err)
	}
	args := `{"operation":"get_info"}`
	b.Setenv("WARDEN_LOG_LEVEL", "warn")
	b.Setenv("WARDEN_APPROVE", "")

	b.Run("mcp-stdio", func(b *testing.B) {
		ctx := context.Background()
		cmd := exec.Command(bin, "--home", filepath.Join(dir, "home-mcp"), "--workspace", ws, "mcp", "serve")
		session, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { session.Close(); cmd.Wait() }()
		call := func() {
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "system", Arguments: json.RawMessage(args)})
			if err != nil || res.IsError {
				b.Fatalf("%v %+v", err, res)
			}
		}
		timed(b, call)
	})

	b.Run("warden-call-in-process", func(b *testing.B) {
		home := filepath.Join(dir, "home-call")
		call := func() {
			if code := run([]string{"warden", "--home", home, "--workspace", ws, "call", "system", "--args", args}, strings.NewReader(""), io.Discard, io.Discard); code != 0 {
				b.Fatalf("warden call: exit %d", code)
			}
		}
		timed(b, call)
	})

	b.Run("gate-only", func(b *testing.B) {
		home := filepath.Join(dir, "home-gate")
		app := newApp(strings.NewReader(""), io.Discard, io.Discard)
		app.Commands = append(app.Commands, &cli.Command{Name: "bench", Action: env.With(func(ctx context.Context, e *env.Env) error {
			g, err := e.Gate()
			if err != nil {
				return err
			}
			timed(b, func() {
				res, err := g.Call(ctx, gate.Request{Tool: "system", Args: json.RawMessage(args), Principal: []string{"bench"}})
				if err != nil || !res.Success {
					b.Fatalf("%v %+v", err, res.Error)
				}
			})
			return nil
		})})
		if err := app.Run([]string{"warden", "--home", home, "--workspace", ws, "bench"}); err != nil {
			b.Fatal(err)
		}
	})
}

// timed runs call 10 times to warm up, then b.N times, and reports the
// median and the 99th percentile of the calls' durations.
func timed(b *testing.B, call func()) {
	for range 10 {
		call()
	}
	d := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t := time.Now()
		call()
		d = append(d, time.Since(t))
	}
	b.StopTimer()
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "median-µs")
	b.ReportMetric(float64(d[min(len(d)-1, len(d)*99/100)].Microseconds()), "p99-µs")
}
