package builtin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/fs"
	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/builtin/memory"
	"github.com/wardenrt/warden/builtin/shell"
	"github.com/wardenrt/warden/builtin/web"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
)

// argRulesPolicy is a coding agent's policy with rules on arguments.
const argRulesPolicy = `version: 1
grants: ["fs.read:**", "fs.write:**", "exec:*", "net:*", "memory.write:*", "memory.read:*"]
rules:
  - {name: secrets, tool: "*", path: ["**/.env", "**/*.pem", "secrets/**"], action: deny}
  - {name: push-asks, tool: shell, command: ["git push*", "git ** push*"], action: allow, require_approval: true}
  - {name: no-rm-rf, tool: shell, command: "rm -rf*", action: deny}
  - {name: tests, tool: shell, command: ["npm run test*", "npm test"], action: allow}
  - {name: status, tool: shell, command: "git status", action: allow}
  - {name: no-curl, tool: shell, command: "curl*", action: deny}
  - {name: shell-asks, tool: shell, action: allow, require_approval: true}
  - {name: docs, tool: fs_write, path: "docs/**", action: allow}
  - {name: writes-ask, tool: fs_write, action: allow, require_approval: true}
  - {name: http-writes, tool: http, method: [POST, PUT, DELETE, PATCH], action: allow, require_approval: true}
  - {name: evil, tool: http, host: ["*.evil.example", "evil.example"], action: deny}
  - {name: mem-secrets, tool: write_memory, args: {namespace: "secrets*"}, action: deny}
  - {name: mem-drafts, tool: write_memory, args: {namespace: notes, key: "draft-*"}, action: allow}
  - {name: mem-asks, tool: write_memory, action: allow, require_approval: true}
`

// TestArgumentRules: a table of calls through the gate (as dry decisions:
// Explain runs the gate's decision and nothing else), each with the
// verdict and the rule the policy must give it.
func TestArgumentRules(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{"docs", "src", "secrets", "sub", "keys"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p, err := policy.ParsePolicy("rules.yaml", []byte(argRulesPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g := newArgRulesGate(t, p, ws, tool.ApproveNever)
	const deny, ask, allow = "deny", "needs approval", "allow"
	sh := func(cmd string) string { b, _ := json.Marshal(map[string]string{"command": cmd}); return string(b) }
	tests := []struct {
		tool, args string
		verdict    string
		rule       string // the deciding rule's name
	}{
		{"shell", sh("git status"), allow, "status"},
		{"shell", sh("git push origin main"), ask, "push-asks"},
		{"shell", sh("git --no-pager push"), ask, "push-asks"},
		{"shell", sh("npm run test:unit"), allow, "tests"},
		{"shell", sh("npm test"), allow, "tests"},
		// npm runs what package.json says: an opaque subject, judged by the
		// strictest rule, unless a rule names the npm command itself.
		{"shell", sh("npm run build"), deny, "no-rm-rf"},
		{"shell", sh("python3 x.py"), deny, "no-rm-rf"},
		// The opaque subject is python3's, not that of the program before
		// it (found by FuzzPlan: its launcher index was off by the
		// programs before it, so a command rule for git status decided).
		{"shell", sh("git status; python3 x.py"), deny, "no-rm-rf"},
		{"shell", sh("timeout 5 sh -c 'git status; python3 x.py'"), deny, "no-rm-rf"},
		{"shell", sh("echo push origin | xargs git"), ask, "push-asks"},
		{"shell", sh("echo -rf victim | xargs rm"), deny, "no-rm-rf"},
		{"shell", sh("echo 'git push' | sh"), deny, "no-rm-rf"},
		{"shell", sh("bash -s < x.sh"), deny, "no-rm-rf"},
		{"shell", sh(`sh +o errexit -c "git push"`), ask, "push-asks"},
		{"shell", sh(`bash --rcfile /dev/null -c "rm -rf x"`), deny, "no-rm-rf"},
		{"shell", sh(`env -S"git push" x`), ask, "push-asks"},
		{"shell", sh(`env --split-string="rm -rf x"`), deny, "no-rm-rf"},
		{"shell", sh(`flock lk -c "rm -rf x"`), deny, "no-rm-rf"},
		{"shell", sh(`sh -c 'eval "$(echo ls)"'`), deny, "no-rm-rf"},
		{"shell", sh(`sh -c '. ./x.sh'`), deny, "no-rm-rf"},
		{"shell", sh("git status && git push"), ask, "push-asks"},
		{"shell", sh("git status | rm -rf /tmp/x"), deny, "no-rm-rf"},
		{"shell", sh("echo $(rm -rf x)"), deny, "no-rm-rf"},
		{"shell", sh("echo `rm -rf x`"), deny, "no-rm-rf"},
		{"shell", sh("ls; curl http://example.com"), deny, "no-curl"},
		{"shell", sh("true || curl -s x"), deny, "no-curl"},
		{"shell", sh("timeout 5 git push"), ask, "push-asks"},
		{"shell", sh("env FOO=1 rm -rf x"), deny, "no-rm-rf"},
		{"shell", sh("nice -n 5 nohup curl x"), deny, "no-curl"},
		{"shell", sh("sh -c 'git push'"), ask, "push-asks"},
		{"shell", sh(`bash -c "ls && rm -rf /"`), deny, "no-rm-rf"},
		{"shell", sh("xargs rm -rf < /dev/null"), deny, "no-rm-rf"},
		{"shell", sh("/usr/bin/git push"), ask, "push-asks"},
		{"shell", sh(`"git" 'push' origin`), ask, "push-asks"},
		{"shell", sh("g=git; $g push"), ask, "push-asks"},
		{"shell", sh("for f in a b; do git push; done"), ask, "push-asks"},
		{"shell", sh("echo hi"), ask, "shell-asks"},
		{"shell", sh("git stash"), ask, "shell-asks"},
		{"run", sh("npm test"), allow, "tests"},
		{"fs_read", `{"path":".env"}`, deny, "secrets"},
		{"fs_read", `{"path":"sub/.env"}`, deny, "secrets"},
		{"fs_read", `{"path":"keys/server.pem"}`, deny, "secrets"},
		{"fs_read", `{"path":"README.md"}`, allow, ""},
		{"fs_list", `{"path":"secrets"}`, deny, "secrets"},
		{"fs_write", `{"path":"docs/a.md","content":"x"}`, allow, "docs"},
		{"fs_write", `{"path":"src/a.go","content":"x"}`, ask, "writes-ask"},
		{"fs_write", `{"path":"secrets/x","content":"x"}`, deny, "secrets"},
		{"http", `{"method":"GET","url":"https://api.example.com/x"}`, allow, ""},
		{"http", `{"method":"POST","url":"https://api.example.com/x","data":"{}"}`, ask, "http-writes"},
		{"http", `{"method":"delete","url":"https://api.example.com/x"}`, ask, "http-writes"},
		{"http", `{"method":"GET","url":"https://a.b.evil.example/x"}`, deny, "evil"},
		{"http", `{"method":"GET","url":"https://EVIL.example./x"}`, deny, "evil"},
		{"write_memory", `{"namespace":"secrets/aws","key":"k","value":"v"}`, deny, "mem-secrets"},
		{"write_memory", `{"namespace":"notes","key":"draft-1","value":"v"}`, allow, "mem-drafts"},
		{"write_memory", `{"namespace":"notes","key":"final","value":"v"}`, ask, "mem-asks"},
	}
	for _, tt := range tests {
		x := g.Explain(gate.Request{Tool: tt.tool, Args: json.RawMessage(tt.args), Principal: []string{"test"}})
		if x.Verdict != tt.verdict {
			t.Errorf("%s %s: verdict %q, want %q (rule %s; %+v)", tt.tool, tt.args, x.Verdict, tt.verdict, x.Rule, x.Error)
			continue
		}
		if tt.rule == "" {
			if !strings.HasPrefix(x.Rule, "no rule") {
				t.Errorf("%s %s: rule %s, want none", tt.tool, tt.args, x.Rule)
			}
		} else if !strings.Contains(x.Rule, `"`+tt.rule+`"`) {
			t.Errorf("%s %s: rule %s, want %s", tt.tool, tt.args, x.Rule, tt.rule)
		} else if x.Matched == "" && tt.rule != "shell-asks" && tt.rule != "writes-ask" && tt.rule != "mem-asks" {
			t.Errorf("%s %s: no matcher named (rule %s)", tt.tool, tt.args, x.Rule)
		}
	}
	if len(tests) < 30 {
		t.Fatalf("only %d cases", len(tests))
	}
}

// TestArgumentRulesAtRunTime: words the command computes are checked when
// the program starts — an eval that builds `rm -rf` is refused by the
// deny rule though nothing showed it before the command ran.
func TestArgumentRulesAtRunTime(t *testing.T) {
	ws := t.TempDir()
	victim := filepath.Join(ws, "victim")
	if err := os.MkdirAll(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := policy.ParsePolicy("rules.yaml", []byte(argRulesPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g := newArgRulesGate(t, p, ws, tool.ApproveAuto)
	res := tooltest.Call(t, g, "shell", `{"command":"x='rm -rf'; eval \"$x victim\""}`)
	if res.Error == nil || res.Error.Code != tool.CodePolicyDenied || !strings.Contains(res.Error.Message, "no-rm-rf") {
		t.Fatalf("eval of rm -rf: %+v", res)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the victim is gone: %v", err)
	}
	// A program the rules allow runs.
	res = tooltest.Call(t, g, "shell", `{"command":"c=status; eval \"git $c\" >/dev/null 2>&1; echo done"}`)
	if res.Error != nil && res.Error.Code == tool.CodePolicyDenied {
		t.Fatalf("git status refused: %+v", res.Error)
	}
}

func newArgRulesGate(t *testing.T, p *policy.Policy, ws string, mode tool.ApprovalMode) *gate.Gate {
	t.Helper()
	ws, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	reg := gate.NewRegistry()
	tools := append(append(append(shell.Tools(), fs.Tools()...), web.Tools(web.Config{})...), memory.Tools(memory.Config{Memory: nil})...)
	if err := reg.Register(tools...); err != nil {
		t.Fatal(err)
	}
	if err := reg.Alias("run", "shell"); err != nil {
		t.Fatal(err)
	}
	g, err := gate.NewGate(gate.GateOptions{Registry: reg, Policy: p, Workspace: ws, Audit: &runtimetest.Audit{}, Approval: mode})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestArgumentRulesPathsAtRunTime: a path rule holds for a redirection
// whose target is only known when the command runs.
func TestArgumentRulesPathsAtRunTime(t *testing.T) {
	ws := t.TempDir()
	for name, content := range map[string]string{".env": "SECRET_ENV=1\n", "ok.txt": "fine\n"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(ws, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := policy.ParsePolicy("rules.yaml", []byte(argRulesPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g := newArgRulesGate(t, p, ws, tool.ApproveAuto)
	for _, cmd := range []string{`x=.env; read -r line < $x; echo "$line"`, `echo pwn > $(echo secrets/new)`, `cd secrets && echo x > k`} {
		res := tooltest.Call(t, g, "shell", `{"command":`+strconv.Quote(cmd)+`}`)
		if res.Error == nil || res.Error.Code != tool.CodePolicyDenied || strings.Contains(res.Output, "SECRET_ENV") {
			t.Errorf("%s: %+v", cmd, res)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "secrets", "new")); err == nil {
		t.Error("secrets/new was written")
	}
	if res := tooltest.Call(t, g, "shell", `{"command":"x=ok.txt; read -r line < $x; echo \"$line\""}`); !res.Success || !strings.Contains(res.Output, "fine") {
		t.Errorf("an allowed path: %+v", res)
	}
}

// scriptedApprover approves once, remembering it for an hour, and counts
// what it was asked.
type scriptedApprover struct {
	asked []gate.ApprovalRequest
	hour  bool
}

func (a *scriptedApprover) Approve(_ context.Context, r gate.ApprovalRequest) (gate.Approval, error) {
	a.asked = append(a.asked, r)
	ap := gate.Approval{Approved: true, By: "tester"}
	if a.hour && r.CanRemember {
		ap.For = time.Hour
	}
	return ap, nil
}

// TestRememberedApprovalCoversItsRulesOnly: an approval remembered for
// the rule that asked about `echo` does not approve a command that another
// rule asks about too, nor one whose words are only known at run time.
func TestRememberedApprovalCoversItsRulesOnly(t *testing.T) {
	ws := t.TempDir()
	ws, _ = filepath.EvalSymlinks(ws)
	for _, d := range []string{"victim", "victim2"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	p, err := policy.ParsePolicy("h.yaml", []byte(`version: 1
grants: ["fs.read:**", "fs.write:**", "exec:echo", "exec:rm", "exec:printf"]
rules:
  - {tool: shell, command: "echo*", action: allow, require_approval: true}
  - {tool: shell, command: "rm*", action: allow, require_approval: true}
  - {tool: shell, action: allow, require_approval: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	reg := gate.NewRegistry()
	if err := reg.Register(shell.Tools()...); err != nil {
		t.Fatal(err)
	}
	grants := &runtimetest.Grants{}
	ap := &scriptedApprover{hour: true}
	g, err := gate.NewGate(gate.GateOptions{Registry: reg, Policy: p, Workspace: ws, Audit: &runtimetest.Audit{},
		Approval: tool.ApproveAsk, Approver: ap, Grants: grants})
	if err != nil {
		t.Fatal(err)
	}
	if res := tooltest.Call(t, g, "shell", `{"command":"echo hi"}`); !res.Success || len(ap.asked) != 1 || !ap.asked[0].CanRemember {
		t.Fatalf("first echo: %+v, asked %d", res, len(ap.asked))
	}
	if res := tooltest.Call(t, g, "shell", `{"command":"echo again"}`); !res.Success || len(ap.asked) != 1 {
		t.Fatalf("the remembered approval did not cover echo: asked %d", len(ap.asked))
	}
	ap.hour = false
	tooltest.Call(t, g, "shell", `{"command":"echo hi; rm -r victim"}`)
	if len(ap.asked) != 2 {
		t.Fatalf("echo; rm was not asked about (asked %d)", len(ap.asked))
	}
	tooltest.Call(t, g, "shell", `{"command":"$(printf rm) -r victim2"}`)
	if len(ap.asked) != 3 || ap.asked[2].Lasting || ap.asked[2].CanRemember {
		t.Fatalf("a command known only at run time: asked %d, %+v", len(ap.asked), ap.asked[len(ap.asked)-1])
	}
}
