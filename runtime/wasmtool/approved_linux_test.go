//go:build linux

package wasmtool_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenrt/warden/hostfuncs"
	"github.com/wardenrt/warden/internal/wasmfixture"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/wasmtool"
)

// The stamps that save hashing a module (approved.go) are played against
// here: a change that keeps every stamp but the change time, and a change
// no stamp shows at all.

// reopenLater opens the host again (a new process, as far as compiled
// modules go) with a clock far enough ahead that the files' stamps are
// kept (racyWindow).
func (e *env) reopenLater() {
	e.t.Helper()
	h, err := wasmtool.Open(context.Background(), wasmtool.Options{
		Dir: filepath.Join(e.home, "tools"), CacheDir: e.cache, Pins: e.pins, HostFuncs: hostfuncs.Functions(),
		Now: func() time.Time { return time.Now().Add(time.Hour) },
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.host = h
	e.t.Cleanup(func() { h.Close(context.Background()) })
}

// stampedTextstats installs textstats in a host with a cache of its own,
// and loads and calls it once, so its stamps and approved copy are kept.
func stampedTextstats(t *testing.T) *env {
	e := newEnv(t)
	e.cache = t.TempDir()
	e.reopenLater()
	e.install("examples/textstats", "textstats")
	g, statuses := e.gate()
	if statuses[0].State != wasmtool.StateOK {
		t.Fatalf("status %+v", statuses[0])
	}
	wantCode(t, call(t, g, "textstats", `{"text":"One fish."}`), "")
	if _, err := os.Stat(filepath.Join(e.cache, "approved", "textstats.json")); err != nil {
		t.Fatalf("the stamps were not kept: %v", err)
	}
	return e
}

// TestModuleRewrittenWithItsTimesRestored: a module changed in place (same
// file, same size) with its modification time set back is refused: the
// change time, which cannot be set back, moved.
func TestModuleRewrittenWithItsTimesRestored(t *testing.T) {
	e := stampedTextstats(t)
	path := filepath.Join(e.home, "tools", "textstats.wasm")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff // same size
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if now, _ := os.Stat(path); now.Size() != fi.Size() || !now.ModTime().Equal(fi.ModTime()) || !os.SameFile(now, fi) {
		t.Fatal("the rewrite did not keep the file, its size and its modification time")
	}
	e.reopenLater()
	g, statuses := e.gate()
	if statuses[0].State != wasmtool.StateChanged {
		t.Fatalf("status %+v, want changed", statuses[0])
	}
	wantCode(t, call(t, g, "textstats", `{"text":"x"}`), tool.CodeUnknownTool)
}

// TestChangeNoStampShowsRunsTheApprovedModule: a change no stamp shows (a
// write through a shared mapping, which moves the times once per
// write-back, or not at all on tmpfs; played here by stamping the changed
// file as if unchanged) never runs: what runs is the approved copy. And
// without the copy, the changed file is hashed and refused.
func TestChangeNoStampShowsRunsTheApprovedModule(t *testing.T) {
	e := stampedTextstats(t)
	path := filepath.Join(e.home, "tools", "textstats.wasm")
	other, err := os.ReadFile(wasmfixture.Path(t, "hostile/trap", false)) // its call panics
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, other, 0o600); err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(e.cache, "approved", "textstats.json")
	var v map[string]json.RawMessage
	raw, err := os.ReadFile(entry)
	if err != nil || json.Unmarshal(raw, &v) != nil {
		t.Fatalf("entry %s: %v", raw, err)
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	v["wasm"], _ = json.Marshal(map[string]int64{
		"dev": int64(st.Dev), "ino": int64(st.Ino), "size": st.Size, "mtime_ns": st.Mtim.Nano(), "ctime_ns": st.Ctim.Nano(),
	})
	raw, _ = json.Marshal(v)
	if err := os.WriteFile(entry, raw, 0o600); err != nil {
		t.Fatal(err)
	}

	e.reopenLater()
	g, statuses := e.gate()
	if statuses[0].State != wasmtool.StateOK {
		t.Fatalf("status %+v: the forged stamp was not taken, the test proves nothing", statuses[0])
	}
	res := call(t, g, "textstats", `{"text":"One fish. Two fish."}`)
	wantCode(t, res, "")
	var d map[string]any
	if err := json.Unmarshal(res.Data, &d); err != nil || d["words"] != float64(4) {
		t.Fatalf("data %s (%v): not the approved textstats", res.Data, err)
	}

	copies, _ := filepath.Glob(filepath.Join(e.cache, "approved", "*.wasm"))
	for _, c := range copies {
		if err := os.Remove(c); err != nil {
			t.Fatal(err)
		}
	}
	e.reopenLater()
	g, _ = e.gate()
	res = call(t, g, "textstats", `{"text":"x"}`)
	if res.Success || !strings.Contains(res.Error.Message, "changed since approved") {
		t.Fatalf("without the approved copy: %+v, want the change refused", res)
	}
}

// TestFreshFilesAreNotStamped: a file changed within racyWindow is hashed
// at every check until it is older.
func TestFreshFilesAreNotStamped(t *testing.T) {
	e := newEnv(t)
	e.cache = t.TempDir()
	h, err := wasmtool.Open(context.Background(), wasmtool.Options{
		Dir: filepath.Join(e.home, "tools"), CacheDir: e.cache, Pins: e.pins, HostFuncs: hostfuncs.Functions(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	e.host = h
	e.install("examples/textstats", "textstats")
	if _, statuses := e.gate(); statuses[0].State != wasmtool.StateOK {
		t.Fatalf("status %+v", statuses[0])
	}
	if _, err := os.Stat(filepath.Join(e.cache, "approved", "textstats.json")); !os.IsNotExist(err) {
		t.Fatalf("a file just written was stamped (%v)", err)
	}
}
