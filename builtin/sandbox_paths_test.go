//go:build unix

package builtin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenrt/warden/builtin/fs"
	"github.com/wardenrt/warden/builtin/git"
	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/builtin/memory"
	"github.com/wardenrt/warden/builtin/shell"
	"github.com/wardenrt/warden/runtime/pathrule"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
)

// TestHiddenAndProtectedInTools: the policy's hide: and protect: lists
// hold for warden's own tools too — fs_read, read_files, fs_write,
// fs_remove, the shell's redirections, git_diff, git_show and the
// workspace index — whatever the grants, with CAPABILITY_DENIED naming the
// entry; and no hidden byte reaches a result.
func TestHiddenAndProtectedInTools(t *testing.T) {
	const secret = "HIDDEN-SECRET-77"
	ws := tooltest.GitFixture(t)
	runtimetest.WriteFile(t, ws, ".env", "KEY="+secret+"\n")
	runtimetest.WriteFile(t, ws, "keys/id.pem", secret+"\n")
	runtimetest.WriteFile(t, ws, "deploy/run.sh", "echo deploy\n")
	tooltest.GitPlain(t, ws, "add", "-A")
	tooltest.GitPlain(t, ws, "commit", "-q", "-m", "with secrets")
	runtimetest.WriteFile(t, ws, ".env", "KEY="+secret+"-changed\n")
	runtimetest.WriteFile(t, ws, "a.txt", "visible change\n")

	mem := &runtimetest.Memory{}
	policyYAML := `version: 1
grants: ["fs.read:**", "fs.write:**", "git.read", "exec:cat", "memory.read:*", "memory.write:*"]
hide: [".env", "*.pem"]
protect: ["deploy/"]
rules:
  - { tool: shell, action: allow }
`
	tools := append(append(append(fs.Tools(), git.Tools(git.Config{})...), tool.Adapt[shell.Args](&shell.Shell{})), memory.Tools(memory.Config{Memory: mem})...)
	g, _ := tooltest.Gate(t, policyYAML, ws, tools...)
	noSecret := func(what string, res tool.Result) {
		t.Helper()
		if strings.Contains(res.Output+string(res.Data), secret) {
			t.Errorf("%s: the hidden content reached the result: %s %s", what, res.Output, res.Data)
		}
	}
	denied := func(what string, res tool.Result, entry string) {
		t.Helper()
		noSecret(what, res)
		if res.Success || res.Error.Code != tool.CodeCapabilityDenied || !strings.Contains(res.Error.Message, entry) {
			t.Errorf("%s: %+v", what, res.Error)
		}
	}
	denied("fs_read .env", tooltest.Call(t, g, "fs_read", `{"path":".env"}`), `hide: ".env"`)
	denied("fs_read keys/id.pem", tooltest.Call(t, g, "fs_read", `{"path":"keys/id.pem"}`), `hide: "*.pem"`)
	denied("read_files", tooltest.Call(t, g, "read_files", `{"file_paths":["a.txt",".env"]}`), `hide: ".env"`)
	denied("fs_write a hidden file", tooltest.Call(t, g, "fs_write", `{"path":".env","content":"x","overwrite":true}`), `hide: ".env"`)
	denied("fs_write a protected file", tooltest.Call(t, g, "fs_write", `{"path":"deploy/run.sh","content":"x","overwrite":true}`), `protect: "deploy/"`)
	denied("shell redirection", tooltest.Call(t, g, "shell", `{"command":"cat < .env"}`), `hide: ".env"`)
	denied("shell redirection at run time", tooltest.Call(t, g, "shell", `{"command":"f=.env; cat < $f"}`), `hide: ".env"`)
	denied("shell write into a protected path", tooltest.Call(t, g, "shell", `{"command":"d=deploy; echo x > $d/run.sh"}`), `protect: "deploy/"`)
	denied("git_show of a hidden file", tooltest.Call(t, g, "git_show", `{"ref":"HEAD:.env"}`), `hide: ".env"`)
	if res := tooltest.Call(t, g, "fs_remove", `{"path":".","recursive":true}`); res.Success {
		t.Errorf("fs_remove of the workspace: %+v", res)
	}
	// A symlink to a hidden file is the hidden file.
	if err := os.Symlink(filepath.Join(ws, ".env"), filepath.Join(ws, "innocent.txt")); err != nil {
		t.Fatal(err)
	}
	denied("fs_read through a symlink", tooltest.Call(t, g, "fs_read", `{"path":"innocent.txt"}`), `hide: ".env"`)
	os.Remove(filepath.Join(ws, "innocent.txt"))

	// git_diff and git_show leave hidden files out, and say so.
	res := tooltest.Call(t, g, "git_diff", `{}`)
	noSecret("git_diff", res)
	if !res.Success || !strings.Contains(res.Output, "visible change") || !strings.Contains(strings.Join(res.Warnings, " "), "hides") {
		t.Errorf("git_diff: %+v %q %q", res.Error, res.Output, res.Warnings)
	}
	res = tooltest.Call(t, g, "git_show", `{"ref":"HEAD"}`)
	noSecret("git_show HEAD", res)
	if !res.Success || !strings.Contains(res.Output, "deploy/run.sh") || !strings.Contains(strings.Join(res.Warnings, " "), "hides") {
		t.Errorf("git_show: %+v %q %q", res.Error, res.Output, res.Warnings)
	}

	// The index never holds hidden content; get_context never shows it,
	// even what was indexed before the policy hid it.
	if _, err := IndexWorkspace(context.Background(), mem, ws, nil); err != nil { // no hide list: .env indexed
		t.Fatal(err)
	}
	res = tooltest.Call(t, g, "get_context", `{"query":"KEY"}`)
	noSecret("get_context over an index made before hide:", res)
	if !res.Success || strings.Contains(string(res.Data), `"hidden_files":0`) {
		t.Errorf("get_context did not leave the hidden file out: %+v %s", res.Error, res.Data)
	}
	p, err := policy.ParsePolicy("p", []byte(policyYAML))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := IndexWorkspace(context.Background(), mem, ws, &IndexOptions{Hide: pathrule.New(p.Hide)}); err != nil {
		t.Fatal(err)
	}
	entries, err := mem.ListMemory(context.Background(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Value, secret) || strings.Contains(e.Key, ".env") {
			t.Errorf("the index holds hidden content: %s %s", e.Namespace, e.Key)
		}
	}
	res = tooltest.Call(t, g, "query_memory", `{"query":"KEY"}`)
	noSecret("query_memory", res)
}
