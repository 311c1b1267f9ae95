//go:build unix

package fs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// callCtx calls tool through the gate with the caller's context.
func callCtx(t testing.TB, ctx context.Context, g *gate.Gate, tool string, args map[string]any) tool.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	res, err := g.Call(ctx, gate.Request{Tool: tool, Args: raw, Principal: []string{"test"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// endedContexts are contexts that ended before the call: cancelled, and
// past their deadline.
func endedContexts(t *testing.T) map[string]context.Context {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	t.Cleanup(cancel2)
	return map[string]context.Context{"cancelled": cancelled, "expired": expired}
}

// countdownCtx is a context whose Err reports nil for the first n calls
// and context.Canceled afterwards: it ends a tool's loop after exactly n
// steps, deterministically (fs_glob and read_files check ctx.Err() once per
// match or file and use nothing else of the context).
type countdownCtx struct {
	context.Context
	left atomic.Int64
}

func countdown(n int64) *countdownCtx {
	c := &countdownCtx{Context: context.Background()}
	c.left.Store(n)
	return c
}

func (c *countdownCtx) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// Appending copies the file: a file over 64 MiB is refused with TOO_LARGE
// (and the hint about appends), in the real call and in the dry run, and
// nothing changes. The big file is sparse, so the test is cheap.
func TestFSWriteAppendTooLarge(t *testing.T) {
	ws, g, _ := testWS(t, testRW)
	name := filepath.Join(ws, "big.log")
	tooltest.WriteFile(t, name, "", 0o644)
	if err := os.Truncate(name, maxAppendBase+1); err != nil {
		t.Fatal(err)
	}
	before := tooltest.TreeChecksum(t, ws)
	args := map[string]any{"path": "big.log", "content": "one more line\n", "append": true}
	for _, dry := range []bool{false, true} {
		var res tool.Result
		if dry {
			res = fsDry(t, g, "fs_write", args)
		} else {
			res = fsCall(t, g, "fs_write", args)
		}
		tooltest.WantCode(t, res, tool.CodeTooLarge)
		if !strings.Contains(res.Error.Hint, "append to files of at most 64 MiB") {
			t.Errorf("dry=%v: hint %q", dry, res.Error.Hint)
		}
		if !strings.Contains(res.Error.Message, fmt.Sprint(maxAppendBase+1)) {
			t.Errorf("dry=%v: message %q does not give the size", dry, res.Error.Message)
		}
	}
	if fi, err := os.Stat(name); err != nil || fi.Size() != maxAppendBase+1 {
		t.Fatalf("the file changed: %v %v", fi, err)
	}
	if tooltest.TreeChecksum(t, ws) != before {
		t.Fatal("the workspace changed")
	}
	noTemps(t, ws)
	// Overwriting it does not need a copy: that is allowed.
	tooltest.WantOK(t, fsCall(t, g, "fs_write", map[string]any{"path": "big.log", "content": "short\n"}))
	if got := tooltest.ReadFile(t, name); got != "short\n" {
		t.Fatalf("overwrite: %q", got)
	}
}

// fs_glob under a context that ended, before the walk or in the middle of
// it, returns TIMEOUT saying how far it got, and no partial list.
func TestFSGlobCancelled(t *testing.T) {
	ws, g, _ := testWS(t, testRO)
	for i := range 5 {
		tooltest.WriteFile(t, filepath.Join(ws, "src", fmt.Sprintf("f%d.go", i)), "", 0o644)
	}
	args := map[string]any{"pattern": "src/*.go"}
	tooltest.WantOK(t, fsCall(t, g, "fs_glob", args)) // a live context finds them
	for name, ctx := range endedContexts(t) {
		t.Run(name, func(t *testing.T) {
			res := callCtx(t, ctx, g, "fs_glob", args)
			tooltest.WantCode(t, res, tool.CodeTimeout)
			if !strings.Contains(res.Error.Message, "cancelled after 0 matches") || res.Output != "" {
				t.Errorf("%q %q", res.Error.Message, res.Output)
			}
		})
	}
	t.Run("mid-walk", func(t *testing.T) {
		res := callCtx(t, countdown(2), g, "fs_glob", args)
		tooltest.WantCode(t, res, tool.CodeTimeout)
		if !strings.Contains(res.Error.Message, "cancelled after 2 matches") || res.Output != "" {
			t.Errorf("%q %q", res.Error.Message, res.Output)
		}
	})
}

// read_files under a context that ended skips every file it had not read
// yet, each with TIMEOUT, and keeps the files read before.
func TestFSReadFilesCancelled(t *testing.T) {
	ws, g, _ := testWS(t, testRO)
	paths := []string{"a.txt", "b.txt", "c.txt"}
	for _, p := range paths {
		tooltest.WriteFile(t, filepath.Join(ws, p), strings.ToUpper(p[:1])+"\n", 0o644)
	}
	args := map[string]any{"file_paths": paths}
	check := func(t *testing.T, res tool.Result, read int) {
		t.Helper()
		tooltest.WantOK(t, res)
		d := tooltest.Decode[ReadFilesData](t, res)
		var got []string
		for _, f := range d.Files {
			got = append(got, f.Path)
		}
		if !slices.Equal(got, paths[:read]) || d.FilesReadCount != read {
			t.Fatalf("read %v (%d), want %v", got, d.FilesReadCount, paths[:read])
		}
		if len(d.SkippedFiles) != len(paths)-read {
			t.Fatalf("skipped %+v", d.SkippedFiles)
		}
		for i, s := range d.SkippedFiles {
			if s.Path != paths[read+i] || s.Code != tool.CodeTimeout || !strings.Contains(s.Reason, "cancelled before") {
				t.Errorf("skipped %+v", s)
			}
		}
		if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], fmt.Sprintf("skipped %d of %d", len(paths)-read, len(paths))) {
			t.Errorf("warnings %v", res.Warnings)
		}
		want := ""
		for _, p := range paths[:read] {
			want += "==> " + p + " <==\n" + strings.ToUpper(p[:1]) + "\n"
		}
		if res.Output != want {
			t.Errorf("output %q, want %q", res.Output, want)
		}
	}
	for name, ctx := range endedContexts(t) {
		t.Run(name, func(t *testing.T) { check(t, callCtx(t, ctx, g, "read_files", args), 0) })
	}
	t.Run("after the first file", func(t *testing.T) {
		check(t, callCtx(t, countdown(1), g, "read_files", args), 1)
	})
}
