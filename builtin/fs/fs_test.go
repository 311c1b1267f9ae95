//go:build unix

package fs

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
)

const (
	testRW = "version: 1\ngrants: [\"fs.read:**\", \"fs.write:**\"]\n"
	testRO = "version: 1\ngrants: [\"fs.read:**\"]\n"
)

// testWS returns a fresh workspace (symlinks resolved) and a gate over the
// fs tools with the policy given.
func testWS(t testing.TB, policy string) (string, *gate.Gate, *runtimetest.Audit) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g, audit := tooltest.Gate(t, policy, ws, Tools()...)
	return ws, g, audit
}

// fsCall calls tool with args (marshalled to JSON) through the gate.
func fsCall(t testing.TB, g *gate.Gate, tool string, args map[string]any) tool.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return tooltest.Call(t, g, tool, string(raw))
}

// fsDry calls tool with args as a dry run.
func fsDry(t testing.TB, g *gate.Gate, tool string, args map[string]any) tool.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return tooltest.CallReq(t, g, gate.Request{Tool: tool, Args: raw, Principal: []string{"test"}, DryRun: true})
}

// noTemps fails if a temporary file of fs_write is left under dir.
func noTemps(t testing.TB, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".warden-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

// checkRedaction calls tool with a secret in a path argument, twice: with a
// NUL byte after it (the path is refused while the needs are computed) and as
// a well-formed path that goes on to run (the secret is then also in the
// needs, which the gate redacts). Each time tooltest.AssertNoSecret checks the
// envelope and every audit event, needs included.
func checkRedaction(t *testing.T, g *gate.Gate, audit *runtimetest.Audit, toolName string, args func(p string) map[string]any) {
	t.Helper()
	res := fsCall(t, g, toolName, args("d/"+tooltest.Canary+"\x00"))
	tooltest.WantCode(t, res, tool.CodeInvalidInput)
	tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
	res = fsCall(t, g, toolName, args("d/"+tooltest.Canary))
	tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
	if tooltest.Count(audit, "[REDACTED]") == 0 {
		t.Errorf("%s: nothing was redacted in the audit log", toolName)
	}
}

func TestFSToolsRegister(t *testing.T) {
	reg := gate.NewRegistry()
	if err := reg.Register(Tools()...); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range reg.Specs() {
		names = append(names, s.Name)
		if s.Description == "" || len(s.Capabilities) == 0 {
			t.Errorf("%s: spec incomplete", s.Name)
		}
	}
	want := []string{"fs_glob", "fs_list", "fs_mkdir", "fs_read", "fs_remove", "fs_write", "read_files"}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
}

func TestFSRead(t *testing.T) {
	ws, g, _ := testWS(t, testRO)
	tooltest.WriteFile(t, filepath.Join(ws, "notes/a.txt"), "héllo\nworld\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "bin.dat"), "ab\x00cd", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "latin1.txt"), "caf\xe9", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "empty.txt"), "", 0o644)
	big := strings.Repeat("x", maxReadBytes+1)
	tooltest.WriteFile(t, filepath.Join(ws, "big.txt"), big, 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "big64.dat"), big[:maxReadBase64+1], 0o644)
	if err := os.Symlink("notes/a.txt", filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("happy", func(t *testing.T) {
		for _, p := range []string{"notes/a.txt", "./notes/../notes/a.txt", "link.txt", filepath.Join(ws, "notes/a.txt")} {
			res := fsCall(t, g, "fs_read", map[string]any{"path": p})
			tooltest.WantOK(t, res)
			d := tooltest.Decode[ReadData](t, res)
			if res.Output != "héllo\nworld\n" || d.BytesRead != 13 || d.Encoding != "utf-8" || d.ResolvedPath != filepath.Join(ws, "notes/a.txt") || d.Path != p {
				t.Errorf("%s: %q %+v", p, res.Output, d)
			}
		}
		res := fsCall(t, g, "fs_read", map[string]any{"path": "empty.txt"})
		tooltest.WantOK(t, res)
		if res.Output != "" || tooltest.Decode[ReadData](t, res).BytesRead != 0 {
			t.Errorf("empty: %+v", res)
		}
	})
	t.Run("base64", func(t *testing.T) {
		res := fsCall(t, g, "fs_read", map[string]any{"path": "bin.dat", "encoding": "base64"})
		tooltest.WantOK(t, res)
		got, err := base64.StdEncoding.DecodeString(res.Output)
		if err != nil || string(got) != "ab\x00cd" || tooltest.Decode[ReadData](t, res).Encoding != "base64" {
			t.Errorf("%q %v %s", res.Output, err, res.Data)
		}
	})
	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			name string
			args map[string]any
			code tool.Code
			msg  string
		}{
			{"missing", map[string]any{"path": "nope.txt"}, tool.CodeNotFound, "does not exist"},
			{"missing dir", map[string]any{"path": "no/such/file"}, tool.CodeNotFound, ""},
			{"NUL byte", map[string]any{"path": "bin.dat"}, tool.CodeNotText, "not UTF-8 text"},
			{"invalid UTF-8", map[string]any{"path": "latin1.txt"}, tool.CodeNotText, ""},
			{"too large", map[string]any{"path": "big.txt"}, tool.CodeTooLarge, "1048577 bytes"},
			{"too large base64", map[string]any{"path": "big64.dat", "encoding": "base64"}, tool.CodeTooLarge, ""},
			{"directory", map[string]any{"path": "notes"}, tool.CodeInvalidInput, "is a directory"},
			{"trailing slash", map[string]any{"path": "notes/a.txt/"}, tool.CodeInvalidInput, "names a directory"},
			{"file as directory", map[string]any{"path": "notes/a.txt/x"}, tool.CodeInvalidInput, "not a directory"},
			{"fifo", map[string]any{"path": "fifo"}, tool.CodeInvalidInput, "fifo"},
			{"empty path", map[string]any{"path": ""}, tool.CodeInvalidInput, ""},
			{"bad encoding", map[string]any{"path": "notes/a.txt", "encoding": "latin-1"}, tool.CodeInvalidInput, ""},
			{"unknown field", map[string]any{"path": "notes/a.txt", "offset": 3}, tool.CodeInvalidInput, ""},
			{"outside", map[string]any{"path": "/etc/hostname"}, tool.CodeCapabilityDenied, ""},
			{"dot dot", map[string]any{"path": "../x"}, tool.CodeCapabilityDenied, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				res := fsCall(t, g, "fs_read", tt.args)
				tooltest.WantCode(t, res, tt.code)
				if !strings.Contains(res.Error.Message, tt.msg) {
					t.Errorf("message %q lacks %q", res.Error.Message, tt.msg)
				}
			})
		}
		res := fsCall(t, g, "fs_read", map[string]any{"path": "big.txt"})
		if !strings.Contains(res.Error.Hint, "sed -n") {
			t.Errorf("TOO_LARGE hint %q", res.Error.Hint)
		}
		res = fsCall(t, g, "fs_read", map[string]any{"path": "bin.dat"})
		if !strings.Contains(res.Error.Hint, "base64") {
			t.Errorf("NOT_TEXT hint %q", res.Error.Hint)
		}
	})
	t.Run("dry run", func(t *testing.T) {
		before := tooltest.TreeChecksum(t, ws)
		res := fsDry(t, g, "fs_read", map[string]any{"path": "notes/a.txt"})
		tooltest.WantOK(t, res)
		if res.Output != "héllo\nworld\n" || tooltest.TreeChecksum(t, ws) != before {
			t.Errorf("dry run of a read-only tool: %+v", res)
		}
	})
	t.Run("redaction", func(t *testing.T) {
		ws, g, audit := testWS(t, testRO)
		tooltest.WriteFile(t, filepath.Join(ws, "cfg.txt"), "token="+tooltest.Canary+"\n", 0o644)
		res := fsCall(t, g, "fs_read", map[string]any{"path": "cfg.txt"})
		tooltest.WantOK(t, res)
		tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
		checkRedaction(t, g, audit, "fs_read", func(p string) map[string]any { return map[string]any{"path": p} })
	})
}

func TestFSReadAbsoluteGrant(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	etc, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tooltest.WriteFile(t, filepath.Join(etc, "nginx/nginx.conf"), "worker_processes 1;\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(etc, "shadow"), "root:x\n", 0o644)
	g, _ := tooltest.Gate(t, fmt.Sprintf("version: 1\ngrants: [%q]\n", "fs.read:"+etc+"/nginx/**"), ws, Tools()...)
	res := fsCall(t, g, "fs_read", map[string]any{"path": filepath.Join(etc, "nginx/nginx.conf")})
	tooltest.WantOK(t, res)
	if res.Output != "worker_processes 1;\n" {
		t.Fatalf("%q", res.Output)
	}
	for _, p := range []string{filepath.Join(etc, "shadow"), filepath.Join(etc, "nginx/../shadow")} {
		tooltest.WantCode(t, fsCall(t, g, "fs_read", map[string]any{"path": p}), tool.CodeCapabilityDenied)
	}
	res = fsCall(t, g, "fs_list", map[string]any{"path": filepath.Join(etc, "nginx")})
	tooltest.WantOK(t, res)
	res = fsCall(t, g, "fs_glob", map[string]any{"pattern": etc + "/nginx/*.conf"})
	tooltest.WantOK(t, res)
	if d := tooltest.Decode[GlobData](t, res); len(d.Matches) != 1 || d.Matches[0] != filepath.Join(etc, "nginx/nginx.conf") {
		t.Fatalf("%+v", d)
	}
}

// TestFSRestrictedGrants: a call acting with an intersection of sets (a wasm
// tool: run ∩ tool grants) may be allowed by no single grant; the tools then
// open the narrowest root (the parent directory) and still check what they
// open.
func TestFSRestrictedGrants(t *testing.T) {
	ws, g, _ := testWS(t, testRW)
	tooltest.WriteFile(t, filepath.Join(ws, "notes/a.md"), "# a\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "notes/b.txt"), "b\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "other/c.md"), "c\n", 0o644)
	restrict, err := capability.ParseSet(ws, []string{"fs.read:notes/**", "fs.write:notes/**"})
	if err != nil {
		t.Fatal(err)
	}
	narrow, err := capability.ParseSet(ws, []string{"fs.read:**/*.md", "fs.write:**/*.md"})
	if err != nil {
		t.Fatal(err)
	}
	restrict = restrict.Intersect(narrow)
	call := func(tool string, args map[string]any) tool.Result {
		raw, _ := json.Marshal(args)
		return tooltest.CallReq(t, g, gate.Request{Tool: tool, Args: raw, Principal: []string{"wasm:test"}, Restrict: &restrict})
	}
	res := call("fs_read", map[string]any{"path": "notes/a.md"})
	tooltest.WantOK(t, res)
	tooltest.WantCode(t, call("fs_read", map[string]any{"path": "notes/b.txt"}), tool.CodeCapabilityDenied)
	tooltest.WantCode(t, call("fs_read", map[string]any{"path": "other/c.md"}), tool.CodeCapabilityDenied)
	tooltest.WantOK(t, call("fs_write", map[string]any{"path": "notes/new.md", "content": "n\n"}))
	tooltest.WantCode(t, call("fs_write", map[string]any{"path": "notes/new.txt", "content": "n\n"}), tool.CodeCapabilityDenied)
	if tooltest.ReadFile(t, filepath.Join(ws, "notes/new.md")) != "n\n" {
		t.Fatal("write did not land")
	}
}

func TestFSWrite(t *testing.T) {
	t.Run("create with parents", func(t *testing.T) {
		ws, g, _ := testWS(t, testRW)
		res := fsCall(t, g, "fs_write", map[string]any{"path": "a/b/c.txt", "content": "hello\n"})
		tooltest.WantOK(t, res)
		d := tooltest.Decode[WriteData](t, res)
		if !d.Created || d.Overwrote || d.BytesWritten != 6 || d.Mode != "write" || !slices.Equal(d.CreatedDirs, []string{"a", "a/b"}) || len(res.Warnings) != 0 {
			t.Fatalf("%+v %v", d, res.Warnings)
		}
		if got := tooltest.ReadFile(t, filepath.Join(ws, "a/b/c.txt")); got != "hello\n" {
			t.Fatalf("%q", got)
		}
		noTemps(t, ws)
	})
	t.Run("overwrite warns and keeps the mode", func(t *testing.T) {
		ws, g, _ := testWS(t, testRW)
		name := filepath.Join(ws, "f.sh")
		tooltest.WriteFile(t, name, "old\n", 0o644)
		if err := os.Chmod(name, 0o750); err != nil {
			t.Fatal(err)
		}
		res := fsCall(t, g, "fs_write", map[string]any{"path": "f.sh", "content": "new\n"})
		tooltest.WantOK(t, res)
		d := tooltest.Decode[WriteData](t, res)
		if !d.Overwrote || d.Created || d.PreviousBytes != 4 || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "overwrites an existing file: f.sh") {
			t.Fatalf("%+v %v", d, res.Warnings)
		}
		fi, _ := os.Stat(name)
		if tooltest.ReadFile(t, name) != "new\n" || fi.Mode().Perm() != 0o750 {
			t.Fatalf("%q %v", tooltest.ReadFile(t, name), fi.Mode())
		}
		res = fsCall(t, g, "fs_write", map[string]any{"path": "f.sh", "content": "newer\n", "overwrite": true})
		tooltest.WantOK(t, res)
		noTemps(t, ws)
	})
	t.Run("append", func(t *testing.T) {
		ws, g, _ := testWS(t, testRW)
		name := filepath.Join(ws, "log.txt")
		tooltest.WriteFile(t, name, "one\n", 0o644)
		res := fsCall(t, g, "fs_write", map[string]any{"path": "log.txt", "content": "two\n", "append": true, "overwrite": false})
		tooltest.WantOK(t, res)
		d := tooltest.Decode[WriteData](t, res)
		if tooltest.ReadFile(t, name) != "one\ntwo\n" || d.Mode != "append" || d.Overwrote || len(res.Warnings) != 0 {
			t.Fatalf("%q %+v %v", tooltest.ReadFile(t, name), d, res.Warnings)
		}
		res = fsCall(t, g, "fs_write", map[string]any{"path": "new.txt", "content": "x", "append": true})
		tooltest.WantOK(t, res)
		if !tooltest.Decode[WriteData](t, res).Created || tooltest.ReadFile(t, filepath.Join(ws, "new.txt")) != "x" {
			t.Fatalf("append to a new file: %s", res.Data)
		}
	})
	t.Run("through a symlink in the workspace", func(t *testing.T) {
		ws, g, _ := testWS(t, testRW)
		tooltest.WriteFile(t, filepath.Join(ws, "real/t.txt"), "old\n", 0o644)
		os.Symlink("real/t.txt", filepath.Join(ws, "ln"))
		os.Symlink("real", filepath.Join(ws, "lndir"))
		res := fsCall(t, g, "fs_write", map[string]any{"path": "ln", "content": "via link\n"})
		tooltest.WantOK(t, res)
		if d := tooltest.Decode[WriteData](t, res); d.ResolvedPath != filepath.Join(ws, "real/t.txt") {
			t.Fatalf("%+v", d)
		}
		if fi, err := os.Lstat(filepath.Join(ws, "ln")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatal("the link was replaced")
		}
		tooltest.WantOK(t, fsCall(t, g, "fs_write", map[string]any{"path": "lndir/u.txt", "content": "u"}))
		if tooltest.ReadFile(t, filepath.Join(ws, "real/t.txt")) != "via link\n" || tooltest.ReadFile(t, filepath.Join(ws, "real/u.txt")) != "u" {
			t.Fatal("writes did not reach the targets")
		}
	})
	t.Run("base64", func(t *testing.T) {
		ws, g, _ := testWS(t, testRW)
		raw := []byte{0, 1, 2, 0xff, 0xfe}
		res := fsCall(t, g, "fs_write", map[string]any{"path": "b.bin", "content": base64.StdEncoding.EncodeToString(raw), "encoding": "base64"})
		tooltest.WantOK(t, res)
		if got := tooltest.ReadFile(t, filepath.Join(ws, "b.bin")); got != string(raw) {
			t.Fatalf("%q", got)
		}
	})
	t.Run("errors", func(t *testing.T) {
		ws, g, _ := testWS(t, testRW)
		tooltest.WriteFile(t, filepath.Join(ws, "exists.txt"), "keep\n", 0o644)
		tooltest.WriteFile(t, filepath.Join(ws, "dir/x"), "", 0o644)
		tooltest.WriteFile(t, filepath.Join(ws, "linked.txt"), "shared\n", 0o644)
		if err := os.Link(filepath.Join(ws, "linked.txt"), filepath.Join(ws, "dir/linked2.txt")); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			args map[string]any
			code tool.Code
		}{
			{"overwrite false", map[string]any{"path": "exists.txt", "content": "x", "overwrite": false}, tool.CodeAlreadyExists},
			{"NUL in text", map[string]any{"path": "n.txt", "content": "a\x00b"}, tool.CodeNotText},
			{"bad base64", map[string]any{"path": "n.bin", "content": "!!!", "encoding": "base64"}, tool.CodeInvalidInput},
			{"directory", map[string]any{"path": "dir", "content": "x"}, tool.CodeInvalidInput},
			{"trailing slash", map[string]any{"path": "new/", "content": "x"}, tool.CodeInvalidInput},
			{"parent is a file", map[string]any{"path": "exists.txt/y", "content": "x"}, tool.CodeInvalidInput},
			{"fifo", map[string]any{"path": "fifo", "content": "x"}, tool.CodeInvalidInput},
			{"hard link", map[string]any{"path": "linked.txt", "content": "x"}, tool.CodePolicyDenied},
			{".git", map[string]any{"path": ".git/config", "content": "x"}, tool.CodePolicyDenied},
			{".warden", map[string]any{"path": ".warden/policy.yaml", "content": "x"}, tool.CodePolicyDenied},
			{"missing content", map[string]any{"path": "n.txt"}, tool.CodeInvalidInput},
			{"outside", map[string]any{"path": "../escape.txt", "content": "x"}, tool.CodeCapabilityDenied},
		}
		before := tooltest.TreeChecksum(t, ws)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				tooltest.WantCode(t, fsCall(t, g, "fs_write", tt.args), tt.code)
			})
		}
		if tooltest.TreeChecksum(t, ws) != before {
			t.Fatal("a refused write changed the workspace")
		}
		_, g2, _ := testWS(t, testRO)
		res := fsCall(t, g2, "fs_write", map[string]any{"path": "x.txt", "content": "x"})
		tooltest.WantCode(t, res, tool.CodeCapabilityDenied)
		if !slices.Equal(res.Error.Missing, []string{"fs.write:x.txt"}) || res.Error.Hint != "needs the grant fs.write:x.txt" {
			t.Errorf("missing %q, hint %q", res.Error.Missing, res.Error.Hint)
		}
	})
	t.Run("narrow grant: parents need it too", func(t *testing.T) {
		ws, g, _ := testWS(t, "version: 1\ngrants: [\"fs.write:notes/*.md\"]\n")
		if err := os.Mkdir(filepath.Join(ws, "notes"), 0o755); err != nil {
			t.Fatal(err)
		}
		tooltest.WantOK(t, fsCall(t, g, "fs_write", map[string]any{"path": "notes/a.md", "content": "# a\n"}))
		tooltest.WantCode(t, fsCall(t, g, "fs_write", map[string]any{"path": "notes/a.txt", "content": "x"}), tool.CodeCapabilityDenied)
		tooltest.WantCode(t, fsCall(t, g, "fs_write", map[string]any{"path": "notes/sub/b.md", "content": "x"}), tool.CodeCapabilityDenied)
		if _, err := os.Stat(filepath.Join(ws, "notes/sub")); !os.IsNotExist(err) {
			t.Fatal("a refused write created a directory")
		}
	})
	t.Run("dry run", func(t *testing.T) {
		ws, g, _ := testWS(t, testRW)
		tooltest.WriteFile(t, filepath.Join(ws, "f.txt"), "a\nb\nc\nd\ne\nf\ng\nh\n", 0o644)
		before := tooltest.TreeChecksum(t, ws)
		res := fsDry(t, g, "fs_write", map[string]any{"path": "f.txt", "content": "a\nb\nc\nD\ne\nf\ng\nh\n"})
		tooltest.WantOK(t, res)
		want := "--- a/f.txt\n+++ b/f.txt\n@@ -1,7 +1,7 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n"
		d := tooltest.Decode[WriteData](t, res)
		if !res.DryRun || !strings.Contains(res.Output, "would overwrite f.txt") || !strings.HasSuffix(res.Output, want) || d.Diff != want || !d.Overwrote {
			t.Fatalf("output %q\ndata %+v", res.Output, d)
		}
		if len(res.Warnings) != 2 || !strings.Contains(strings.Join(res.Warnings, "|"), "overwrites an existing file") {
			t.Errorf("warnings %v", res.Warnings)
		}
		res = fsDry(t, g, "fs_write", map[string]any{"path": "new/dir/n.txt", "content": "x\ny"})
		tooltest.WantOK(t, res)
		want = "--- /dev/null\n+++ b/new/dir/n.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n\\ No newline at end of file\n"
		if d := tooltest.Decode[WriteData](t, res); d.Diff != want || !slices.Equal(d.CreatedDirs, []string{"new", "new/dir"}) || !d.Created {
			t.Fatalf("%q %+v", res.Output, d)
		}
		res = fsDry(t, g, "fs_write", map[string]any{"path": "f.txt", "content": "i\n", "append": true})
		tooltest.WantOK(t, res)
		if d := tooltest.Decode[WriteData](t, res); !strings.HasSuffix(d.Diff, " f\n g\n h\n+i\n") {
			t.Fatalf("append diff %q", d.Diff)
		}
		res = fsDry(t, g, "fs_write", map[string]any{"path": "f.txt", "content": base64.StdEncoding.EncodeToString([]byte{0, 1}), "encoding": "base64"})
		tooltest.WantOK(t, res)
		if !strings.Contains(res.Output, "Binary files a/f.txt and b/f.txt differ") {
			t.Fatalf("%q", res.Output)
		}
		// The preview refuses what the write would refuse.
		tooltest.WantCode(t, fsDry(t, g, "fs_write", map[string]any{"path": "f.txt", "content": "x", "overwrite": false}), tool.CodeAlreadyExists)
		if tooltest.TreeChecksum(t, ws) != before {
			t.Fatal("the dry run changed the workspace")
		}
	})
	t.Run("dry run without read grant hides the old content", func(t *testing.T) {
		ws, g, _ := testWS(t, "version: 1\ngrants: [\"fs.write:**\"]\n")
		tooltest.WriteFile(t, filepath.Join(ws, "s.txt"), "PRIVATE OLD CONTENT\n", 0o644)
		for _, app := range []bool{false, true} {
			res := fsDry(t, g, "fs_write", map[string]any{"path": "s.txt", "content": "new\n", "append": app})
			tooltest.WantOK(t, res)
			if strings.Contains(res.Output, "PRIVATE") || strings.Contains(string(res.Data), "PRIVATE") || !strings.Contains(res.Output, "+new\n") || !strings.Contains(res.Output, "not shown") {
				t.Fatalf("append=%v: %q", app, res.Output)
			}
		}
	})
	t.Run("redaction", func(t *testing.T) {
		ws, g, audit := testWS(t, testRW)
		res := fsCall(t, g, "fs_write", map[string]any{"path": "env.txt", "content": "GITHUB_TOKEN=" + tooltest.Canary + "\n"})
		tooltest.WantOK(t, res)
		tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
		if !strings.Contains(tooltest.ReadFile(t, filepath.Join(ws, "env.txt")), tooltest.Canary) {
			t.Fatal("the file itself must hold what was written")
		}
		res = fsDry(t, g, "fs_write", map[string]any{"path": "env.txt", "content": "GITHUB_TOKEN=" + tooltest.Canary + "x\n"})
		tooltest.WantOK(t, res)
		tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
		checkRedaction(t, g, audit, "fs_write", func(p string) map[string]any { return map[string]any{"path": p, "content": "x"} })
	})
}

func TestFSList(t *testing.T) {
	ws, g, audit := testWS(t, testRO)
	tooltest.WriteFile(t, filepath.Join(ws, "b.txt"), "12345", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "a/x"), "", 0o644)
	os.Symlink("b.txt", filepath.Join(ws, "c"))
	syscall.Mkfifo(filepath.Join(ws, "p"), 0o644)
	res := fsCall(t, g, "fs_list", map[string]any{"path": "."})
	tooltest.WantOK(t, res)
	d := tooltest.Decode[ListData](t, res)
	want := []ListEntry{{"a", "dir", 0}, {"b.txt", "file", 5}, {"c", "symlink", 0}, {"p", "fifo", 0}}
	if !slices.Equal(d.Entries, want) || d.Count != 4 || d.Truncated || res.Output != "a/\nb.txt\nc@\np\n" {
		t.Fatalf("%q %+v", res.Output, d)
	}
	for _, p := range []string{"a", "a/", "./a/.", ws + "/a"} {
		res = fsCall(t, g, "fs_list", map[string]any{"path": p})
		tooltest.WantOK(t, res)
		if res.Output != "x\n" {
			t.Errorf("%s: %q", p, res.Output)
		}
	}
	tooltest.WantCode(t, fsCall(t, g, "fs_list", map[string]any{"path": "nope"}), tool.CodeNotFound)
	tooltest.WantCode(t, fsCall(t, g, "fs_list", map[string]any{"path": "b.txt"}), tool.CodeInvalidInput)
	tooltest.WantCode(t, fsCall(t, g, "fs_list", map[string]any{"path": "p"}), tool.CodeInvalidInput)
	tooltest.WantCode(t, fsCall(t, g, "fs_list", map[string]any{"path": ".."}), tool.CodeCapabilityDenied)
	before := tooltest.TreeChecksum(t, ws)
	tooltest.WantOK(t, fsDry(t, g, "fs_list", map[string]any{"path": "."}))
	if tooltest.TreeChecksum(t, ws) != before {
		t.Fatal("dry run changed the workspace")
	}
	checkRedaction(t, g, audit, "fs_list", func(p string) map[string]any { return map[string]any{"path": p} })

	t.Run("truncated", func(t *testing.T) {
		dir := filepath.Join(ws, "many")
		os.Mkdir(dir, 0o755)
		for i := 0; i <= maxListEntries; i++ {
			f, err := os.Create(filepath.Join(dir, strconv.Itoa(i)))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		res := fsCall(t, g, "fs_list", map[string]any{"path": "many"})
		tooltest.WantOK(t, res)
		if d := tooltest.Decode[ListData](t, res); !d.Truncated || d.Count != maxListEntries || len(res.Warnings) != 1 {
			t.Fatalf("count %d truncated %v", d.Count, d.Truncated)
		}
	})
}

func TestFSMkdir(t *testing.T) {
	ws, g, audit := testWS(t, testRW)
	tooltest.WriteFile(t, filepath.Join(ws, "file"), "", 0o644)
	res := fsCall(t, g, "fs_mkdir", map[string]any{"path": "a/b/c"})
	tooltest.WantOK(t, res)
	d := tooltest.Decode[MkdirData](t, res)
	if !d.Created || !slices.Equal(d.CreatedDirs, []string{"a", "a/b", "a/b/c"}) {
		t.Fatalf("%+v", d)
	}
	if fi, err := os.Stat(filepath.Join(ws, "a/b/c")); err != nil || !fi.IsDir() {
		t.Fatal(err)
	}
	res = fsCall(t, g, "fs_mkdir", map[string]any{"path": "a/b/c"}) // exist_ok defaults to true
	tooltest.WantOK(t, res)
	if tooltest.Decode[MkdirData](t, res).Created {
		t.Fatal("created an existing directory")
	}
	tests := []struct {
		name string
		args map[string]any
		code tool.Code
	}{
		{"exists, exist_ok false", map[string]any{"path": "a/b", "exist_ok": false}, tool.CodeAlreadyExists},
		{"a file is there", map[string]any{"path": "file"}, tool.CodeAlreadyExists},
		{"parent missing, parents false", map[string]any{"path": "x/y", "parents": false}, tool.CodeNotFound},
		{"under a file", map[string]any{"path": "file/sub"}, tool.CodeInvalidInput},
		{".git", map[string]any{"path": ".git/hooks"}, tool.CodePolicyDenied},
		{".warden", map[string]any{"path": "sub/.Warden"}, tool.CodePolicyDenied},
		{"outside", map[string]any{"path": "../out"}, tool.CodeCapabilityDenied},
		{"NUL", map[string]any{"path": "a\x00b"}, tool.CodeInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tooltest.WantCode(t, fsCall(t, g, "fs_mkdir", tt.args), tt.code) })
	}
	tooltest.WantOK(t, fsCall(t, g, "fs_mkdir", map[string]any{"path": "single", "parents": false}))

	before := tooltest.TreeChecksum(t, ws)
	res = fsDry(t, g, "fs_mkdir", map[string]any{"path": "p/q"})
	tooltest.WantOK(t, res)
	if d := tooltest.Decode[MkdirData](t, res); res.Output != "would create the directories:\np\np/q" || !slices.Equal(d.CreatedDirs, []string{"p", "p/q"}) {
		t.Fatalf("%q %+v", res.Output, d)
	}
	tooltest.WantCode(t, fsDry(t, g, "fs_mkdir", map[string]any{"path": "a", "exist_ok": false}), tool.CodeAlreadyExists)
	if tooltest.TreeChecksum(t, ws) != before {
		t.Fatal("dry run changed the workspace")
	}

	_, g2, _ := testWS(t, "version: 1\ngrants: [\"fs.write:a/**\"]\n")
	tooltest.WantOK(t, fsCall(t, g2, "fs_mkdir", map[string]any{"path": "a/b"}))
	tooltest.WantCode(t, fsCall(t, g2, "fs_mkdir", map[string]any{"path": "b/c"}), tool.CodeCapabilityDenied)

	checkRedaction(t, g, audit, "fs_mkdir", func(p string) map[string]any { return map[string]any{"path": p} })
}

func TestFSRemove(t *testing.T) {
	ws, g, audit := testWS(t, testRW)
	tooltest.WriteFile(t, filepath.Join(ws, "f.txt"), "x", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "tree/a/1.txt"), "1", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "tree/a/2.txt"), "2", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "tree/b.txt"), "b", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "repo/src/main.go"), "package main", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "repo/.git/HEAD"), "ref: refs/heads/main", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "target.txt"), "target", 0o644)
	os.Symlink("target.txt", filepath.Join(ws, "link"))
	os.Mkdir(filepath.Join(ws, "empty"), 0o755)

	before := tooltest.TreeChecksum(t, ws)
	res := fsDry(t, g, "fs_remove", map[string]any{"path": "tree", "recursive": true})
	tooltest.WantOK(t, res)
	d := tooltest.Decode[RemoveData](t, res)
	if d.Files != 3 || d.Dirs != 2 || !slices.Equal(d.Entries, []string{"tree/a", "tree/a/1.txt", "tree/a/2.txt", "tree/b.txt"}) ||
		!strings.HasPrefix(res.Output, "would remove tree and everything under it: 3 files, 2 directories\n") ||
		!strings.Contains(strings.Join(res.Warnings, "|"), "RECURSIVE DELETE: tree") {
		t.Fatalf("%q %+v %v", res.Output, d, res.Warnings)
	}
	tooltest.WantOK(t, fsDry(t, g, "fs_remove", map[string]any{"path": "f.txt"}))
	tooltest.WantCode(t, fsDry(t, g, "fs_remove", map[string]any{"path": "tree"}), tool.CodeInvalidInput)
	if tooltest.TreeChecksum(t, ws) != before {
		t.Fatal("dry run changed the workspace")
	}

	res = fsCall(t, g, "fs_remove", map[string]any{"path": "f.txt"})
	tooltest.WantOK(t, res)
	if d := tooltest.Decode[RemoveData](t, res); !d.Removed || d.Type != "file" || len(res.Warnings) != 1 || res.Warnings[0] != "deletes f.txt (file)" {
		t.Fatalf("%+v %v", d, res.Warnings)
	}
	res = fsCall(t, g, "fs_remove", map[string]any{"path": "link"})
	tooltest.WantOK(t, res)
	if tooltest.Decode[RemoveData](t, res).Type != "symlink" || tooltest.ReadFile(t, filepath.Join(ws, "target.txt")) != "target" {
		t.Fatal("removing a symlink must leave its target")
	}
	if _, err := os.Lstat(filepath.Join(ws, "link")); !os.IsNotExist(err) {
		t.Fatal("link still there")
	}
	tooltest.WantOK(t, fsCall(t, g, "fs_remove", map[string]any{"path": "empty"}))
	res = fsCall(t, g, "fs_remove", map[string]any{"path": "tree"})
	tooltest.WantCode(t, res, tool.CodeInvalidInput)
	if !strings.Contains(res.Error.Hint, "recursive") {
		t.Errorf("hint %q", res.Error.Hint)
	}
	res = fsCall(t, g, "fs_remove", map[string]any{"path": "tree", "recursive": true})
	tooltest.WantOK(t, res)
	if _, err := os.Lstat(filepath.Join(ws, "tree")); !os.IsNotExist(err) {
		t.Fatal("tree still there")
	}
	res = fsCall(t, g, "fs_remove", map[string]any{"path": "gone", "force": true})
	tooltest.WantOK(t, res)
	if tooltest.Decode[RemoveData](t, res).Removed || len(res.Warnings) != 0 {
		t.Fatalf("%s", res.Data)
	}
	tests := []struct {
		name string
		args map[string]any
		code tool.Code
	}{
		{"missing", map[string]any{"path": "gone"}, tool.CodeNotFound},
		{"workspace", map[string]any{"path": ".", "recursive": true}, tool.CodeInvalidInput},
		{"workspace by name", map[string]any{"path": ws, "recursive": true}, tool.CodeInvalidInput},
		{".git", map[string]any{"path": "repo/.git/HEAD"}, tool.CodePolicyDenied},
		{".git itself", map[string]any{"path": "repo/.git", "recursive": true}, tool.CodePolicyDenied},
		{"tree holding .git", map[string]any{"path": "repo", "recursive": true}, tool.CodePolicyDenied},
		{"outside", map[string]any{"path": "../x"}, tool.CodeCapabilityDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tooltest.WantCode(t, fsCall(t, g, "fs_remove", tt.args), tt.code) })
	}
	if tooltest.ReadFile(t, filepath.Join(ws, "repo/src/main.go")) != "package main" {
		t.Fatal("a refused recursive delete removed something")
	}
	_, g2, _ := testWS(t, testRO)
	tooltest.WantCode(t, fsCall(t, g2, "fs_remove", map[string]any{"path": "x"}), tool.CodeCapabilityDenied)

	checkRedaction(t, g, audit, "fs_remove", func(p string) map[string]any { return map[string]any{"path": p, "force": true} })
}

func TestFSGlob(t *testing.T) {
	ws, g, audit := testWS(t, testRO)
	outside, _ := filepath.EvalSymlinks(t.TempDir())
	tooltest.WriteFile(t, filepath.Join(outside, "secret.go"), "package secret", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "main.go"), "", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "src/a.go"), "", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "src/deep/b.go"), "", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "src/c.txt"), "", 0o644)
	os.Symlink(filepath.Join(outside, "secret.go"), filepath.Join(ws, "src/leak.go"))
	os.Symlink(outside, filepath.Join(ws, "src/outdir"))

	res := fsCall(t, g, "fs_glob", map[string]any{"pattern": "**/*.go"})
	tooltest.WantOK(t, res)
	d := tooltest.Decode[GlobData](t, res)
	if !slices.Equal(d.Matches, []string{"main.go", "src/a.go", "src/deep/b.go"}) || d.Count != 3 || d.OmittedByGrants != 1 || d.Truncated {
		t.Fatalf("%+v", d)
	}
	res = fsCall(t, g, "fs_glob", map[string]any{"pattern": "src/*.go"})
	tooltest.WantOK(t, res)
	if d := tooltest.Decode[GlobData](t, res); !slices.Equal(d.Matches, []string{"src/a.go"}) || res.Output != "src/a.go\n" {
		t.Fatalf("%+v", d)
	}
	res = fsCall(t, g, "fs_glob", map[string]any{"pattern": "src/{a,c}.*"})
	tooltest.WantOK(t, res)
	if d := tooltest.Decode[GlobData](t, res); len(d.Matches) != 2 {
		t.Fatalf("%+v", d)
	}
	res = fsCall(t, g, "fs_glob", map[string]any{"pattern": "nothing/here/*"})
	tooltest.WantOK(t, res)
	if d := tooltest.Decode[GlobData](t, res); d.Count != 0 {
		t.Fatalf("%+v", d)
	}
	tests := []struct {
		pattern string
		code    tool.Code
	}{
		{"src/[a", tool.CodeInvalidInput},
		{"*/../*", tool.CodeInvalidInput},
		{"src/*/./x", tool.CodeInvalidInput},
		{"../*", tool.CodeCapabilityDenied},
		{outside + "/*", tool.CodeCapabilityDenied},
		{"src/outdir/*", tool.CodeCapabilityDenied},
		{"a\x00*", tool.CodeInvalidInput},
	}
	for _, tt := range tests {
		tooltest.WantCode(t, fsCall(t, g, "fs_glob", map[string]any{"pattern": tt.pattern}), tt.code)
	}
	before := tooltest.TreeChecksum(t, ws)
	tooltest.WantOK(t, fsDry(t, g, "fs_glob", map[string]any{"pattern": "**"}))
	if tooltest.TreeChecksum(t, ws) != before {
		t.Fatal("dry run changed the workspace")
	}
	checkRedaction(t, g, audit, "fs_glob", func(p string) map[string]any { return map[string]any{"pattern": p + "/*"} })

	t.Run("truncated", func(t *testing.T) {
		for i := 0; i <= maxGlobResults; i++ {
			f, err := os.Create(filepath.Join(ws, "src", fmt.Sprintf("f%04d.txt", i)))
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		res := fsCall(t, g, "fs_glob", map[string]any{"pattern": "src/*.txt"})
		tooltest.WantOK(t, res)
		if d := tooltest.Decode[GlobData](t, res); !d.Truncated || d.Count != maxGlobResults || len(res.Warnings) != 1 {
			t.Fatalf("count %d truncated %v", d.Count, d.Truncated)
		}
	})
	t.Run("narrow grant filters matches", func(t *testing.T) {
		ws, g, _ := testWS(t, "version: 1\ngrants: [\"fs.read:docs\", \"fs.read:docs/*.md\"]\n")
		tooltest.WriteFile(t, filepath.Join(ws, "docs/a.md"), "", 0o644)
		tooltest.WriteFile(t, filepath.Join(ws, "docs/b.txt"), "", 0o644)
		res := fsCall(t, g, "fs_glob", map[string]any{"pattern": "docs/*"})
		tooltest.WantOK(t, res)
		if d := tooltest.Decode[GlobData](t, res); !slices.Equal(d.Matches, []string{"docs/a.md"}) || d.OmittedByGrants != 1 {
			t.Fatalf("%+v", d)
		}
	})
}

func TestFSReadFiles(t *testing.T) {
	ws, g, audit := testWS(t, testRO)
	tooltest.WriteFile(t, filepath.Join(ws, "a.txt"), "A\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "b.txt"), "B", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "bin"), "\x00", 0o644)
	os.Mkdir(filepath.Join(ws, "dir"), 0o755)
	os.Symlink("loop2", filepath.Join(ws, "loop1"))
	os.Symlink("loop1", filepath.Join(ws, "loop2"))
	res := fsCall(t, g, "read_files", map[string]any{"file_paths": []string{"a.txt", "missing", "b.txt", "bin", "dir", "loop1"}})
	tooltest.WantOK(t, res)
	d := tooltest.Decode[ReadFilesData](t, res)
	if res.Output != "==> a.txt <==\nA\n==> b.txt <==\nB\n" || d.FilesReadCount != 2 || len(d.Files) != 2 || d.Files[1] != (ReadFilesEntry{"b.txt", 1}) {
		t.Fatalf("%q %+v", res.Output, d)
	}
	var codes []string
	for _, s := range d.SkippedFiles {
		codes = append(codes, s.Path+":"+string(s.Code))
		if s.Reason == "" {
			t.Errorf("no reason for %s", s.Path)
		}
	}
	if want := []string{"missing:NOT_FOUND", "bin:NOT_TEXT", "dir:INVALID_INPUT", "loop1:INVALID_INPUT"}; !slices.Equal(codes, want) {
		t.Fatalf("skipped %v, want %v", codes, want)
	}
	if len(res.Warnings) != 1 {
		t.Errorf("warnings %v", res.Warnings)
	}
	tooltest.WantCode(t, fsCall(t, g, "read_files", map[string]any{"file_paths": []string{"a.txt", "/etc/passwd"}}), tool.CodeCapabilityDenied)
	tooltest.WantCode(t, fsCall(t, g, "read_files", map[string]any{"file_paths": []string{"a\x00"}}), tool.CodeInvalidInput)
	tooltest.WantCode(t, fsCall(t, g, "read_files", map[string]any{"file_paths": []string{}}), tool.CodeInvalidInput)
	tooltest.WantCode(t, fsCall(t, g, "read_files", map[string]any{"file_paths": "a.txt"}), tool.CodeInvalidInput)
	before := tooltest.TreeChecksum(t, ws)
	tooltest.WantOK(t, fsDry(t, g, "read_files", map[string]any{"file_paths": []string{"a.txt"}}))
	if tooltest.TreeChecksum(t, ws) != before {
		t.Fatal("dry run changed the workspace")
	}
	checkRedaction(t, g, audit, "read_files", func(p string) map[string]any { return map[string]any{"file_paths": []string{"a.txt", p}} })

	t.Run("total cap", func(t *testing.T) {
		half := strings.Repeat("y", maxReadBytes/2+10)
		tooltest.WriteFile(t, filepath.Join(ws, "h1"), half, 0o644)
		tooltest.WriteFile(t, filepath.Join(ws, "h2"), half, 0o644)
		res := fsCall(t, g, "read_files", map[string]any{"file_paths": []string{"h1", "h2", "a.txt"}})
		tooltest.WantOK(t, res)
		d := tooltest.Decode[ReadFilesData](t, res)
		if d.FilesReadCount != 2 || len(d.SkippedFiles) != 1 || d.SkippedFiles[0].Code != tool.CodeTooLarge || d.SkippedFiles[0].Path != "h2" {
			t.Fatalf("%+v", d.SkippedFiles)
		}
	})
}
