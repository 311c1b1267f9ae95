package builtin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenrt/warden/builtin/fs"
	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/builtin/shell"
	"github.com/wardenrt/warden/builtin/web"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
)

// benchPolicies are a policy of 5 rules on tool names and one of 200 rules
// on arguments (80 on shell commands, 60 on paths, 40 on http methods and
// hosts, 20 on argument fields), each ending in the same name rules.
func benchPolicies(b *testing.B) map[string]*policy.Policy {
	head := "version: 1\ngrants: [\"fs.read:**\", \"fs.write:**\", \"exec:*\", \"net:*\", \"memory.write:*\"]\nrules:\n"
	names := `  - {tool: shell, action: allow, require_approval: true}
  - {tool: fs_write, action: allow, require_approval: true}
  - {tool: restart_service, action: deny}
  - {tool: modify_config, action: allow, require_approval: true}
  - {tool: git_commit, action: allow, require_approval: true}
`
	var args strings.Builder
	for i := range 80 {
		fmt.Fprintf(&args, "  - {tool: shell, command: [\"prog%d sub%d*\", \"tool%d ** --flag%d\"], action: deny}\n", i, i, i, i)
	}
	for i := range 60 {
		fmt.Fprintf(&args, "  - {tool: \"fs_*\", path: [\"dir%d/**\", \"**/*.ext%d\"], action: deny}\n", i, i)
	}
	for i := range 40 {
		fmt.Fprintf(&args, "  - {tool: http, method: [POST, PUT], host: [\"*.host%d.example\"], action: deny}\n", i)
	}
	for i := range 15 {
		fmt.Fprintf(&args, "  - {tool: write_memory, args: {namespace: \"ns%d/*\"}, action: deny}\n", i)
	}
	out := map[string]*policy.Policy{}
	for name, src := range map[string]string{"5-name-rules": head + names, "200-argument-rules": head + args.String() + names} {
		p, err := policy.ParsePolicy(name, []byte(src))
		if err != nil {
			b.Fatal(err)
		}
		out[name] = p
	}
	if n := len(out["200-argument-rules"].Rules); n != 200 {
		b.Fatalf("%d rules", n)
	}
	return out
}

// BenchmarkGateRules: the gate's cost per call with 5 rules on tool names
// and with 200 rules on arguments, side by side: a whole fs_read call (4
// KiB file, audit in memory) and the decision alone for a compound shell
// command (parsed, every program matched).
func BenchmarkGateRules(b *testing.B) {
	ws := b.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte(strings.Repeat("x", 4096)), 0o644); err != nil {
		b.Fatal(err)
	}
	pols := benchPolicies(b)
	for _, name := range []string{"5-name-rules", "200-argument-rules"} {
		ws, _ := filepath.EvalSymlinks(ws)
		reg := gate.NewRegistry()
		if err := reg.Register(append(append(shell.Tools(), fs.Tools()...), web.Tools(web.Config{})...)...); err != nil {
			b.Fatal(err)
		}
		g, err := gate.NewGate(gate.GateOptions{Registry: reg, Policy: pols[name], Workspace: ws, Audit: &runtimetest.Audit{}, Approval: tool.ApproveAuto})
		if err != nil {
			b.Fatal(err)
		}
		read := gate.Request{Tool: "fs_read", Args: json.RawMessage(`{"path":"a.txt"}`), Principal: []string{"bench"}}
		b.Run(name+"/fs_read-call", func(b *testing.B) {
			for b.Loop() {
				if res := tooltest.CallReq(b, g, read); !res.Success {
					b.Fatal(res.Error)
				}
			}
		})
		sh := gate.Request{Tool: "shell", Args: json.RawMessage(`{"command":"git status && ls -la | grep -v ok > out.txt"}`), Principal: []string{"bench"}}
		b.Run(name+"/shell-decision", func(b *testing.B) {
			for b.Loop() {
				if x := g.Explain(sh); x.Verdict == policy.ActionDeny {
					b.Fatal(x.Error)
				}
			}
		})
	}
}
