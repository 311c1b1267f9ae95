//go:build linux

package fs

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// The hostile path suite. Each test names the case of issue 3 it covers:
//
//	 1 ".."                          TestFSHostileDotDot
//	 2 absolute path outside         TestFSHostileAbsolute
//	 3 symlink out (read, write)     TestFSHostileSymlinkOut
//	 4 symlink swapped in a race     TestFSHostileSymlinkRace (12,000 attempts, every tool)
//	 5 hard link to an outside file  TestFSHostileHardLink
//	 6 .git/config write             TestFSHostileGitConfig
//	 7 NUL in a path                 TestFSHostileNUL
//	 8 a 5,000-byte path             TestFSHostileLongPath
//	 9 FIFO (no hang)                TestFSHostileFIFO
//	10 symlink loop                  TestFSHostileSymlinkLoop
//	11 trailing slash, dot segments  TestFSHostileDotSegments
//	12 case variants of .GIT         TestFSHostileGitCase
//
// plus the layers below the gate, each shown on its own:
// TestFSHostileRunRechecks, TestFSHostileRootRefuses, TestFSHostileVerifyNarrowGrant.

// hostileSetup returns a workspace and a gate (fs.read:** fs.write:**),
// and an outside directory holding a canary file, with its checksum.
func hostileSetup(t *testing.T) (ws, outside string, g *gate.Gate, sum string) {
	t.Helper()
	ws, g, _ = testWS(t, testRW)
	outside, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tooltest.WriteFile(t, filepath.Join(outside, "canary"), "OUTSIDE-CANARY\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(outside, "sub/deep"), "OUTSIDE-DEEP\n", 0o644)
	return ws, outside, g, tooltest.TreeChecksum(t, outside)
}

// everyTool calls each fs tool on p (as a path, a pattern, a list) and
// returns the results by tool; fs_remove comes last.
func everyTool(t *testing.T, g *gate.Gate, p string) map[string]tool.Result {
	t.Helper()
	m := everyToolButRemove(t, g, p)
	m["fs_remove"] = fsCall(t, g, "fs_remove", map[string]any{"path": p, "recursive": true})
	return m
}

func everyToolButRemove(t *testing.T, g *gate.Gate, p string) map[string]tool.Result {
	t.Helper()
	m := map[string]tool.Result{}
	m["fs_read"] = fsCall(t, g, "fs_read", map[string]any{"path": p})
	m["fs_write"] = fsCall(t, g, "fs_write", map[string]any{"path": p, "content": "PWNED"})
	m["append"] = fsCall(t, g, "fs_write", map[string]any{"path": p, "content": "PWNED", "append": true})
	m["fs_list"] = fsCall(t, g, "fs_list", map[string]any{"path": p})
	m["fs_mkdir"] = fsCall(t, g, "fs_mkdir", map[string]any{"path": p + "/pwned"})
	m["fs_glob"] = fsCall(t, g, "fs_glob", map[string]any{"pattern": p + "/*"})
	m["read_files"] = fsCall(t, g, "read_files", map[string]any{"file_paths": []string{p}})
	return m
}

// noLeak fails when a result shows outside content.
func noLeak(t *testing.T, what string, res tool.Result) {
	t.Helper()
	blob, _ := json.Marshal(res)
	if strings.Contains(string(blob), "OUTSIDE-") {
		t.Errorf("%s: outside content leaked: %s", what, blob)
	}
}

func TestFSHostileDotDot(t *testing.T) {
	ws, outside, g, sum := hostileSetup(t)
	os.Mkdir(filepath.Join(ws, "dir"), 0o755)
	rel, _ := filepath.Rel(ws, outside)
	for _, p := range []string{"..", "../" + filepath.Base(ws) + "/../" + filepath.Base(outside) + "/canary", rel + "/canary", "dir/../../" + filepath.Base(outside), "./dir/../../..", "dir/../" + rel} {
		for toolName, res := range everyTool(t, g, p) {
			noLeak(t, toolName+" "+p, res)
			if toolName == "read_files" {
				tooltest.WantCode(t, res, tool.CodeCapabilityDenied)
				continue
			}
			if res.Success || res.Error.Code != tool.CodeCapabilityDenied && res.Error.Code != tool.CodeInvalidInput {
				t.Errorf("%s %s: %+v", toolName, p, res.Error)
			}
		}
	}
	if tooltest.TreeChecksum(t, outside) != sum {
		t.Fatal("the outside tree changed")
	}
}

func TestFSHostileAbsolute(t *testing.T) {
	_, outside, g, sum := hostileSetup(t)
	for _, p := range []string{filepath.Join(outside, "canary"), outside, "/etc/passwd", "/", "//" + outside[1:] + "/./canary"} {
		for toolName, res := range everyTool(t, g, p) {
			noLeak(t, toolName+" "+p, res)
			if res.Success || res.Error.Code != tool.CodeCapabilityDenied && res.Error.Code != tool.CodeInvalidInput {
				t.Errorf("%s %s: %+v", toolName, p, res.Error)
			}
		}
	}
	if tooltest.TreeChecksum(t, outside) != sum {
		t.Fatal("the outside tree changed")
	}
}

func TestFSHostileSymlinkOut(t *testing.T) {
	ws, outside, g, sum := hostileSetup(t)
	rel, _ := filepath.Rel(ws, outside)
	links := map[string]string{
		"absdir":  outside,                             // a directory, absolute target
		"reldir":  rel,                                 // a directory, relative target
		"absfile": filepath.Join(outside, "canary"),    // the file itself
		"relfile": filepath.Join(rel, "canary"),        // the file, relative
		"chain":   "reldir",                            // a link to a link out
		"dangle":  filepath.Join(outside, "new-file"),  // to a file that does not exist yet
		"updown":  "dir/../" + filepath.Join(rel, "x"), // through .. inside the target
	}
	os.Mkdir(filepath.Join(ws, "dir"), 0o755)
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"absdir/canary", "reldir/canary", "absfile", "relfile", "chain/canary", "dangle", "absdir/sub", "reldir/sub/deep", "updown"} {
		for toolName, res := range everyTool(t, g, p) {
			noLeak(t, toolName+" "+p, res)
			if toolName == "fs_remove" && (p == "absfile" || p == "relfile" || p == "dangle" || p == "updown") {
				continue // removes the link itself (checked below)
			}
			if res.Success {
				t.Errorf("%s %s succeeded: %q", toolName, p, res.Output)
			} else if res.Error.Code != tool.CodeCapabilityDenied && res.Error.Code != tool.CodeNotFound {
				t.Errorf("%s %s: %+v", toolName, p, res.Error)
			}
		}
	}
	// read_files is refused as a whole when one path resolves outside.
	os.Symlink(filepath.Join(outside, "canary"), filepath.Join(ws, "absfile2")) // the sweep above removed absfile itself
	tooltest.WantCode(t, fsCall(t, g, "read_files", map[string]any{"file_paths": []string{"dir", "absfile2"}}), tool.CodeCapabilityDenied)
	// A glob never walks into or returns a link out.
	res := fsCall(t, g, "fs_glob", map[string]any{"pattern": "**"})
	tooltest.WantOK(t, res)
	noLeak(t, "glob", res)
	for _, m := range tooltest.Decode[GlobData](t, res).Matches {
		if strings.Contains(m, "canary") || strings.Contains(m, "deep") {
			t.Errorf("glob returned %s", m)
		}
	}
	if tooltest.TreeChecksum(t, outside) != sum {
		t.Fatal("the outside tree changed")
	}
	if _, err := os.Stat(filepath.Join(outside, "new-file")); !os.IsNotExist(err) {
		t.Fatal("a write through a dangling link created the outside file")
	}
}

// TestFSHostileSymlinkRace flips ws/dir between a real directory and a
// symlink to an outside directory holding a canary (absolute and relative
// links, swapped atomically with renameat2 RENAME_EXCHANGE), while every fs
// tool reaches into dir 12,000 times: fs_read, fs_write, fs_list, fs_mkdir,
// a recursive fs_remove of what fs_mkdir made, a recursive fs_remove of a
// directory only the outside tree has, fs_glob and read_files — one round in
// ten through the whole gate, the rest as the gate would after its check
// (Run with the gate's grants). The outside tree must stay byte-identical
// (checked after every call that writes) and its content and names must
// never be returned.
func TestFSHostileSymlinkRace(t *testing.T) {
	const attempts = 12000
	ws, outside, g, sum := hostileSetup(t)
	tooltest.WriteFile(t, filepath.Join(outside, "outside-only.txt"), "OUTSIDE-ONLY\n", 0o644)
	sum = tooltest.TreeChecksum(t, outside)
	dir := filepath.Join(ws, "dir")
	tooltest.WriteFile(t, filepath.Join(dir, "canary"), "inside\n", 0o644)
	rel, _ := filepath.Rel(ws, outside)
	abslink, rellink := filepath.Join(ws, "abslink"), filepath.Join(ws, "rellink")
	if err := os.Symlink(outside, abslink); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, rellink); err != nil {
		t.Fatal(err)
	}
	exchange := func(a, b string) error {
		return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	}
	if err := exchange(dir, abslink); err != nil {
		t.Skipf("renameat2 RENAME_EXCHANGE unsupported here: %v", err)
	}
	if err := exchange(dir, abslink); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var flips atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			link := abslink
			if i%2 == 1 {
				link = rellink
			}
			if exchange(dir, link) != nil || exchange(dir, link) != nil {
				t.Error("exchange failed")
				return
			}
			flips.Add(2)
		}
	}()

	// The rotation. Inside, dir holds canary and, for a while, tmp/ (made by
	// fs_mkdir, removed by fs_remove); nothing inside is named sub, deep or
	// outside-only, which only the outside tree holds.
	ops := []struct {
		name, tool, args string
		writes           bool
	}{
		{"fs_read", "fs_read", `{"path":"dir/canary"}`, false},
		{"fs_write", "fs_write", `{"path":"dir/canary","content":"inside %d\n"}`, true},
		{"fs_list", "fs_list", `{"path":"dir"}`, false},
		{"fs_mkdir", "fs_mkdir", `{"path":"dir/tmp/a"}`, true},
		{"fs_remove(tmp)", "fs_remove", `{"path":"dir/tmp","recursive":true,"force":true}`, true},
		{"fs_remove(sub)", "fs_remove", `{"path":"dir/sub","recursive":true,"force":true}`, true},
		{"fs_glob", "fs_glob", `{"pattern":"dir/**"}`, false},
		{"read_files", "read_files", `{"file_paths":["dir/canary","dir/sub/deep","dir/outside-only.txt"]}`, false},
	}
	tools := map[string]tool.Tool{}
	for _, tl := range Tools() {
		tools[tl.Spec().Name] = tl
	}
	grants := g.Grants()
	call := func(viaGate bool, toolName, args string) tool.Result {
		if viaGate {
			return tooltest.Call(t, g, toolName, args)
		}
		c := &tool.Call{ID: "race", Tool: toolName, Args: json.RawMessage(args), Principal: []string{"test"}, Grants: grants, Workspace: ws}
		o := tools[toolName].Run(context.Background(), c)
		data, _ := json.Marshal(o.Data)
		return tool.Result{Tool: toolName, Success: o.Err == nil, Output: o.Output, Data: data, Error: o.Err}
	}
	outcomes := map[string]int{}
	layers := map[string]int{} // which layer refused, for PATH_ESCAPE
	escapes := 0
	changedAt := -1
	for i := range attempts {
		op := ops[i%len(ops)]
		args := op.args
		if strings.Contains(args, "%d") {
			args = fmt.Sprintf(args, i)
		}
		res := call((i/len(ops))%10 == 0, op.tool, args)
		// Outside content in the output, or an outside name in the output
		// or data: read_files echoes the names it was given, so for it the
		// files read are checked instead.
		leak := strings.Contains(res.Output, "OUTSIDE")
		did := "" // what a success did, where it varies
		switch {
		case op.tool == "read_files" && res.Success:
			files := tooltest.Decode[ReadFilesData](t, res).Files
			for _, f := range files {
				leak = leak || f.Path != "dir/canary"
			}
			did = fmt.Sprintf("(%d read)", len(files))
		case op.tool == "fs_remove" && res.Success:
			if tooltest.Decode[RemoveData](t, res).Removed {
				did = "(removed)"
			}
		}
		if op.tool != "read_files" {
			out := res.Output + string(res.Data)
			leak = leak || strings.Contains(out, "outside-only") || strings.Contains(out, "deep")
		}
		if leak {
			if escapes == 0 {
				t.Errorf("attempt %d: %s %s returned outside content or names: %q %s", i, op.tool, args, res.Output, res.Data)
			}
			escapes++
		}
		if op.writes && changedAt < 0 && tooltest.TreeChecksum(t, outside) != sum {
			changedAt = i
			t.Errorf("attempt %d: %s %s changed the outside tree (%+v)", i, op.tool, args, res.Error)
		}
		key := op.name + ":ok" + did
		if res.Error != nil {
			key = op.name + ":" + string(res.Error.Code)
			if res.Error.Code == tool.CodePathEscape {
				layers[escapeLayer(res.Error.Message)]++
			}
		}
		outcomes[key]++
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d attempts, %d flips, outcomes %v; PATH_ESCAPE by layer %v", attempts, flips.Load(), outcomes, layers)
	if escapes != 0 {
		t.Fatalf("%d escapes", escapes)
	}
	if tooltest.TreeChecksum(t, outside) != sum {
		t.Fatal("the outside tree changed")
	}
	// Refusals only: allowed, CAPABILITY_DENIED (the gate saw the link),
	// PATH_ESCAPE (Run or os.Root saw it), NOT_FOUND and INVALID_INPUT
	// (ENOTDIR: os.Root met the link mid-swap).
	for k := range outcomes {
		switch code, _, _ := strings.Cut(k[strings.IndexByte(k, ':')+1:], "("); code {
		case "ok", "CAPABILITY_DENIED", "PATH_ESCAPE", "NOT_FOUND", "INVALID_INPUT":
		default:
			t.Errorf("unexpected outcome %s", k)
		}
	}
	// Every operation also did its work now and then, so the loop tested
	// the real paths, not only refusals. (fs_remove(sub) succeeds only as a
	// no-op: inside, dir/sub does not exist.)
	for _, k := range []string{"fs_read:ok", "fs_write:ok", "fs_list:ok", "fs_mkdir:ok", "fs_remove(tmp):ok(removed)",
		"fs_remove(sub):ok", "fs_glob:ok", "read_files:ok(1 read)"} {
		if outcomes[k] == 0 {
			t.Errorf("no %s in the loop: %v", k, outcomes)
		}
	}
	if outcomes["fs_remove(sub):ok(removed)"] != 0 {
		t.Error("fs_remove removed dir/sub, which only the outside tree has")
	}
	noTemps(t, ws)
	noTemps(t, outside)
}

// escapeLayer names the layer a PATH_ESCAPE message comes from.
func escapeLayer(msg string) string {
	switch {
	case strings.Contains(msg, "at access time"):
		return "os.Root"
	case strings.Contains(msg, "now resolves to"):
		return "re-resolution or /proc check"
	case strings.Contains(msg, "kept changing"):
		return "resolution race"
	}
	return "other"
}

func TestFSHostileHardLink(t *testing.T) {
	ws, outside, g, sum := hostileSetup(t)
	if err := os.Link(filepath.Join(outside, "canary"), filepath.Join(ws, "hl")); err != nil {
		t.Skipf("no hard links across these directories: %v", err)
	}
	for _, args := range []map[string]any{
		{"path": "hl", "content": "PWNED"},
		{"path": "hl", "content": "PWNED", "append": true},
		{"path": "hl", "content": "UFdORUQ=", "encoding": "base64"},
	} {
		res := fsCall(t, g, "fs_write", args)
		tooltest.WantCode(t, res, tool.CodePolicyDenied)
		if !strings.Contains(res.Error.Message, "2 hard links") {
			t.Errorf("%+v", res.Error)
		}
	}
	tooltest.WantCode(t, fsDry(t, g, "fs_write", map[string]any{"path": "hl", "content": "x"}), tool.CodePolicyDenied)
	if tooltest.TreeChecksum(t, outside) != sum {
		t.Fatal("the outside file changed")
	}
	// Reading is allowed by design: the link is the file itself, and making
	// it took access to both places (see fs.go).
	res := fsCall(t, g, "fs_read", map[string]any{"path": "hl"})
	tooltest.WantOK(t, res)
	// Removing it unlinks the name in the workspace only.
	tooltest.WantOK(t, fsCall(t, g, "fs_remove", map[string]any{"path": "hl"}))
	if tooltest.ReadFile(t, filepath.Join(outside, "canary")) != "OUTSIDE-CANARY\n" {
		t.Fatal("remove changed the outside file")
	}
}

func TestFSHostileGitConfig(t *testing.T) {
	ws, g, _ := testWS(t, testRW)
	tooltest.WriteFile(t, filepath.Join(ws, ".git/config"), "[core]\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "sub/.git"), "gitdir: ../.git/modules/sub\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, ".warden/policy.yaml"), "version: 1\n", 0o644)
	os.Symlink(".git", filepath.Join(ws, "cfg"))
	os.Symlink(".git/config", filepath.Join(ws, "cfgfile"))
	os.Symlink(".warden", filepath.Join(ws, "pol"))
	before := tooltest.TreeChecksum(t, ws)
	for _, p := range []string{".git/config", ".git/hooks/pre-commit", "./.git/config", "x/../.git/config", "cfg/config", "cfgfile",
		"cfg/hooks/post-checkout", "sub/.git", "deep/er/.git/HEAD", ".warden/policy.yaml", "pol/policy.yaml", ".git"} {
		for _, toolName := range []string{"fs_write", "fs_mkdir", "fs_remove"} {
			if toolName == "fs_remove" && p == "cfgfile" {
				continue // removes the link itself, outside .git: allowed
			}
			args := map[string]any{"path": p}
			if toolName == "fs_write" {
				args["content"] = "[core]\n\thooksPath = /tmp/evil\n"
			}
			tooltest.WantCode(t, fsCall(t, g, toolName, args), tool.CodePolicyDenied)
			tooltest.WantCode(t, fsDry(t, g, toolName, args), tool.CodePolicyDenied)
		}
	}
	tooltest.WantCode(t, fsCall(t, g, "fs_remove", map[string]any{"path": ".", "recursive": true}), tool.CodeInvalidInput)
	tooltest.WantCode(t, fsCall(t, g, "fs_remove", map[string]any{"path": "sub", "recursive": true}), tool.CodePolicyDenied)
	if tooltest.TreeChecksum(t, ws) != before {
		t.Fatal("the workspace changed")
	}
	// Reading git internals is an ordinary read.
	tooltest.WantOK(t, fsCall(t, g, "fs_read", map[string]any{"path": ".git/config"}))
	// Names that only look alike are ordinary files.
	for _, p := range []string{".gitignore", ".github/workflows/ci.yml", "git/config", "a.git/x", ".wardenrc"} {
		tooltest.WantOK(t, fsCall(t, g, "fs_write", map[string]any{"path": p, "content": "ok\n"}))
	}
}

func TestFSHostileNUL(t *testing.T) {
	ws, g, _ := testWS(t, testRW)
	tooltest.WriteFile(t, filepath.Join(ws, "a.txt"), "a", 0o644)
	before := tooltest.TreeChecksum(t, ws)
	for _, p := range []string{"a.txt\x00", "a.txt\x00/../../etc/passwd", "\x00", "dir/\x00x"} {
		for toolName, res := range everyTool(t, g, p) {
			tooltest.WantCode(t, res, tool.CodeInvalidInput)
			_ = toolName
		}
	}
	if tooltest.TreeChecksum(t, ws) != before {
		t.Fatal("the workspace changed")
	}
}

func TestFSHostileLongPath(t *testing.T) {
	ws, g, _ := testWS(t, testRW)
	before := tooltest.TreeChecksum(t, ws)
	long := strings.Repeat("a", 5000)
	deep := strings.Repeat("abcd/", 1000) // 5,000 bytes of short elements
	multi := strings.Repeat("é", 2100)    // 2,100 characters, 4,200 bytes
	for _, p := range []string{long, deep, multi} {
		for toolName, res := range everyTool(t, g, p) {
			tooltest.WantCode(t, res, tool.CodeInvalidInput)
			if len(res.Error.Message) > 1000 {
				t.Errorf("%s: the message repeats the path (%d bytes)", toolName, len(res.Error.Message))
			}
		}
	}
	// A single element over 255 bytes is refused by the file system.
	res := fsCall(t, g, "fs_write", map[string]any{"path": strings.Repeat("b", 300), "content": "x"})
	tooltest.WantCode(t, res, tool.CodeInvalidInput)
	if tooltest.TreeChecksum(t, ws) != before {
		t.Fatal("the workspace changed")
	}
}

// noHang runs f and fails the test if it has not returned after a long
// while (a blocked open, not a performance assertion).
func noHang(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s hung", what)
	}
}

func TestFSHostileFIFO(t *testing.T) {
	ws, g, _ := testWS(t, testRW)
	fifo := filepath.Join(ws, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink("fifo", filepath.Join(ws, "tofifo"))
	noHang(t, "fs tools on a FIFO", func() {
		for _, p := range []string{"fifo", "tofifo"} {
			res := fsCall(t, g, "fs_read", map[string]any{"path": p})
			tooltest.WantCode(t, res, tool.CodeInvalidInput)
			if !strings.Contains(res.Error.Message, "fifo") {
				t.Errorf("%+v", res.Error)
			}
			tooltest.WantCode(t, fsCall(t, g, "fs_read", map[string]any{"path": p, "encoding": "base64"}), tool.CodeInvalidInput)
			tooltest.WantCode(t, fsCall(t, g, "fs_write", map[string]any{"path": p, "content": "x"}), tool.CodeInvalidInput)
			tooltest.WantCode(t, fsCall(t, g, "fs_write", map[string]any{"path": p, "content": "x", "append": true}), tool.CodeInvalidInput)
			tooltest.WantCode(t, fsDry(t, g, "fs_write", map[string]any{"path": p, "content": "x"}), tool.CodeInvalidInput)
			tooltest.WantCode(t, fsCall(t, g, "fs_list", map[string]any{"path": p}), tool.CodeInvalidInput)
			res = fsCall(t, g, "read_files", map[string]any{"file_paths": []string{p}})
			tooltest.WantOK(t, res)
			if d := tooltest.Decode[ReadFilesData](t, res); len(d.SkippedFiles) != 1 || d.SkippedFiles[0].Code != tool.CodeInvalidInput {
				t.Errorf("%+v", d)
			}
			res = fsCall(t, g, "fs_glob", map[string]any{"pattern": p + "/*"})
			tooltest.WantOK(t, res)
			if d := tooltest.Decode[GlobData](t, res); d.Count != 0 {
				t.Errorf("%+v", d)
			}
		}
		res := fsCall(t, g, "fs_glob", map[string]any{"pattern": "**"})
		tooltest.WantOK(t, res)
		if d := tooltest.Decode[GlobData](t, res); len(d.Matches) != 2 {
			t.Errorf("%+v", d)
		}
		tooltest.WantOK(t, fsDry(t, g, "fs_remove", map[string]any{"path": "fifo"}))
	})
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatal("the FIFO was replaced")
	}
}

func TestFSHostileSymlinkLoop(t *testing.T) {
	ws, g, _ := testWS(t, testRW)
	os.Symlink("b", filepath.Join(ws, "a"))
	os.Symlink("a", filepath.Join(ws, "b"))
	os.Symlink("self", filepath.Join(ws, "self"))
	os.Symlink("./c/x", filepath.Join(ws, "c"))
	before := tooltest.TreeChecksum(t, ws)
	noHang(t, "fs tools on a symlink loop", func() {
		for _, p := range []string{"a", "self", "a/x", "c", "c/x/y"} {
			for toolName, res := range everyToolButRemove(t, g, p) {
				if toolName == "read_files" {
					tooltest.WantOK(t, res)
					if d := tooltest.Decode[ReadFilesData](t, res); len(d.SkippedFiles) != 1 || !strings.Contains(d.SkippedFiles[0].Reason, "symbolic links") {
						t.Errorf("read_files %s: %+v", p, d)
					}
					continue
				}
				tooltest.WantCode(t, res, tool.CodeInvalidInput)
				if !strings.Contains(res.Error.Message, "symbolic links") {
					t.Errorf("%s %s: %+v", toolName, p, res.Error)
				}
			}
			if p == "a/x" || p == "c/x/y" {
				tooltest.WantCode(t, fsCall(t, g, "fs_remove", map[string]any{"path": p}), tool.CodeInvalidInput)
			}
		}
		tooltest.WantOK(t, fsCall(t, g, "fs_glob", map[string]any{"pattern": "**"}))
	})
	if tooltest.TreeChecksum(t, ws) != before {
		t.Fatal("the workspace changed")
	}
	// A looping link itself can be removed by name (it is not followed).
	for _, n := range []string{"a", "self", "c"} {
		tooltest.WantOK(t, fsCall(t, g, "fs_remove", map[string]any{"path": n}))
		if _, err := os.Lstat(filepath.Join(ws, n)); !os.IsNotExist(err) {
			t.Errorf("%s: %v", n, err)
		}
	}
}

func TestFSHostileDotSegments(t *testing.T) {
	ws, g, _ := testWS(t, testRW)
	tooltest.WriteFile(t, filepath.Join(ws, "dir/file"), "content\n", 0o644)
	for _, p := range []string{"dir/./file", "dir//file", "./dir/../dir/file", "dir/./././file", "./dir/file"} {
		res := fsCall(t, g, "fs_read", map[string]any{"path": p})
		tooltest.WantOK(t, res)
		if res.Output != "content\n" {
			t.Errorf("%s: %q", p, res.Output)
		}
	}
	for _, p := range []string{"dir/file/", "dir/file/.", "dir/file/..", "dir/file//"} {
		tooltest.WantCode(t, fsCall(t, g, "fs_read", map[string]any{"path": p}), tool.CodeInvalidInput)
	}
	for _, p := range []string{"dir/", "dir/.", "./dir/", "dir/..", "dir/../dir//"} {
		tooltest.WantOK(t, fsCall(t, g, "fs_list", map[string]any{"path": p}))
	}
	for _, p := range []string{"dir/.", "dir/..", ".", "dir/new/"} {
		tooltest.WantCode(t, fsCall(t, g, "fs_write", map[string]any{"path": p, "content": "x"}), tool.CodeInvalidInput)
	}
	tooltest.WantOK(t, fsCall(t, g, "fs_write", map[string]any{"path": "dir/./sub/../file2", "content": "x"}))
	if tooltest.ReadFile(t, filepath.Join(ws, "dir/file2")) != "x" {
		t.Fatal("dir/./sub/../file2 did not land on dir/file2")
	}
	if _, err := os.Stat(filepath.Join(ws, "dir/sub")); !os.IsNotExist(err) {
		t.Fatal("a '..' over a missing directory created it")
	}
	tooltest.WantOK(t, fsCall(t, g, "fs_mkdir", map[string]any{"path": "new/./a/"}))
	for _, p := range []string{"dir/.", "dir/..", "dir/file/.", "new/a/.."} {
		tooltest.WantCode(t, fsCall(t, g, "fs_remove", map[string]any{"path": p, "recursive": true}), tool.CodeInvalidInput)
	}
	tooltest.WantOK(t, fsCall(t, g, "fs_remove", map[string]any{"path": "new/a/", "recursive": true}))
	if _, err := os.Stat(filepath.Join(ws, "dir/file")); err != nil {
		t.Fatal(err)
	}
}

func TestFSHostileGitCase(t *testing.T) {
	ws, g, _ := testWS(t, testRW)
	os.Mkdir(filepath.Join(ws, ".GIT"), 0o755)
	before := tooltest.TreeChecksum(t, ws)
	for _, p := range []string{".GIT/config", ".Git/hooks/pre-commit", "sub/.gIt/HEAD", ".git./config", ".git /config", ".git. ./x",
		".g\u200cit/config", "\ufeff.git/config", "GIT~1/config", "git~1/hooks/x", ".WARDEN/policy.yaml", ".Warden./p"} {
		for _, toolName := range []string{"fs_write", "fs_mkdir", "fs_remove"} {
			args := map[string]any{"path": p}
			if toolName == "fs_write" {
				args["content"] = "x"
			}
			res := fsCall(t, g, toolName, args)
			tooltest.WantCode(t, res, tool.CodePolicyDenied)
		}
	}
	if tooltest.TreeChecksum(t, ws) != before {
		t.Fatal("the workspace changed")
	}
}

// TestFSHostileRunRechecks: a call the gate allowed, whose path then changed
// to a symlink out, is refused by Run's own resolution (PATH_ESCAPE).
func TestFSHostileRunRechecks(t *testing.T) {
	ws, outside, g, sum := hostileSetup(t)
	os.Symlink(outside, filepath.Join(ws, "dir"))
	for _, tc := range []struct {
		tool tool.Tool
		args string
	}{
		{tool.Adapt[readArgs](readTool{}), `{"path":"dir/canary"}`},
		{tool.Adapt[writeArgs](writeTool{}), `{"path":"dir/canary","content":"PWNED"}`},
		{tool.Adapt[listArgs](listTool{}), `{"path":"dir"}`},
		{tool.Adapt[mkdirArgs](mkdirTool{}), `{"path":"dir/x"}`},
		{tool.Adapt[removeArgs](removeTool{}), `{"path":"dir/canary"}`},
		{tool.Adapt[globArgs](globTool{}), `{"pattern":"dir/*"}`},
	} {
		c := &tool.Call{Tool: tc.tool.Spec().Name, Args: json.RawMessage(tc.args), Grants: g.Grants(), Workspace: ws}
		outs := []tool.Outcome{tc.tool.Run(context.Background(), c)}
		if p, ok := tc.tool.(tool.Previewer); ok {
			outs = append(outs, p.Preview(context.Background(), c))
		} else {
			// A read-only tool has no Preview: its dry run is Run itself.
			dry := *c
			dry.DryRun = true
			outs = append(outs, tc.tool.Run(context.Background(), &dry))
		}
		for _, o := range outs {
			if o.Err == nil || o.Err.Code != tool.CodePathEscape || strings.Contains(o.Output, "OUTSIDE") {
				t.Errorf("%s: %+v %q", c.Tool, o.Err, o.Output)
			}
		}
	}
	if tooltest.TreeChecksum(t, outside) != sum {
		t.Fatal("the outside tree changed")
	}
}

// TestFSHostileRootRefuses: below the path checks, os.Root itself refuses
// a symlink out of the tree it is opened on.
func TestFSHostileRootRefuses(t *testing.T) {
	ws, outside, g, _ := hostileSetup(t)
	rel, _ := filepath.Rel(ws, outside)
	os.Symlink(outside, filepath.Join(ws, "abs"))
	os.Symlink(rel, filepath.Join(ws, "rel"))
	c := &tool.Call{Grants: g.Grants(), Workspace: ws}
	for _, p := range []string{"abs/canary", "rel/canary"} {
		loc, e := locate(c, capability.FSRead, filepath.Join(ws, "whatever"))
		if e != nil {
			t.Fatal(e)
		}
		_, _, e = openRegular(c, loc.root, p, p)
		if e == nil || e.Code != tool.CodePathEscape {
			t.Errorf("%s: %+v", p, e)
		}
		loc.rel = p + "/x"
		if _, _, e := openParent(c, capability.FSWrite, loc, p); e == nil || e.Code != tool.CodePathEscape {
			t.Errorf("%s parent: %+v", p, e)
		}
		loc.close()
	}
}

// TestFSHostileVerifyNarrowGrant: a grant narrower than the root it opens
// (fs.read:notes/*.md has the root notes/) — a symlink inside the root to an
// ungranted sibling is caught by the check of what was actually opened.
func TestFSHostileVerifyNarrowGrant(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc: this layer is skipped there")
	}
	tooltest.WriteFile(t, filepath.Join(ws, "notes/a.md"), "# a\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "notes/secret.txt"), "OUTSIDE-GRANT\n", 0o644)
	os.Symlink("secret.txt", filepath.Join(ws, "notes/b.md"))
	set := capability.NewSet(ws, capability.MustParse("fs.read:notes/*.md"), capability.MustParse("fs.write:notes/*.md"))
	c := &tool.Call{Grants: set, Workspace: ws}
	loc, e := locate(c, capability.FSRead, filepath.Join(ws, "notes/a.md"))
	if e != nil {
		t.Fatal(e)
	}
	defer loc.close()
	if loc.dir != filepath.Join(ws, "notes") {
		t.Fatalf("root %s", loc.dir)
	}
	if f, _, e := openRegular(c, loc.root, "a.md", "a.md"); e != nil {
		t.Fatal(e)
	} else {
		f.Close()
	}
	if _, _, e := openRegular(c, loc.root, "b.md", "b.md"); e == nil || e.Code != tool.CodePathEscape {
		t.Fatalf("%+v", e)
	}
	// Through the gate, the resolution already refuses it.
	g, _ := tooltest.Gate(t, "version: 1\ngrants: [\"fs.read:notes/*.md\"]\n", ws, Tools()...)
	tooltest.WantCode(t, fsCall(t, g, "fs_read", map[string]any{"path": "notes/b.md"}), tool.CodeCapabilityDenied)
	tooltest.WantOK(t, fsCall(t, g, "fs_read", map[string]any{"path": "notes/a.md"}))
}
