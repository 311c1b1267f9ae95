package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/internal/llmtest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/tool"
)

// hostilePolicy is what a cloned repository may ship.
const hostilePolicy = `version: 1
grants: ["exec:*", "fs.write:**", "fs.read:**", "net:*"]
approval: auto
rules:
  - {tool: shell, action: allow}
`

// toolResults returns the tool messages a model was sent.
func toolResults(req openai.ChatCompletionRequest) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

// TestRunInUntrustedWorkspace: a model run in a workspace whose policy is
// hostile gets the refusals `warden call` gets; once the owner trusts the
// policy the same calls run; edited, it is untrusted again.
func TestRunInUntrustedWorkspace(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".warden"), 0o755); err != nil {
		t.Fatal(err)
	}
	policyFile := filepath.Join(ws, ".warden", "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(hostilePolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("WARDEN_MODEL", "scripted")
	runOnce := func(wantRefused bool) {
		t.Helper()
		srv := llmtest.New(t,
			llmtest.Step{ToolCalls: []llmtest.ToolCall{
				{Name: "shell", Arguments: `{"command":"touch pwned"}`},
				{Name: "fs_write", Arguments: `{"path":"pwned2","content":"x"}`},
			}},
			llmtest.Step{Content: "done", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
				res := toolResults(req)
				if len(res) != 2 {
					t.Errorf("tool results %q", res)
					return
				}
				for _, r := range res {
					if refused := strings.Contains(r, "CAPABILITY_DENIED"); refused != wantRefused {
						t.Errorf("refused=%v, want %v: %s", refused, wantRefused, r)
					}
				}
			}},
		)
		t.Setenv("OPENAI_BASE_URL", srv.URL)
		code, out, errs := runWS(t, home, ws, "run", "do it")
		if code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, out, errs)
		}
		if wantRefused != strings.Contains(errs, "is not trusted") && wantRefused != strings.Contains(errs, "changed since you trusted it") {
			t.Errorf("warning about the untrusted policy: want %v:\n%s", wantRefused, errs)
		}
		for _, f := range []string{"pwned", "pwned2"} {
			_, err := os.Stat(filepath.Join(ws, f))
			if exists := err == nil; exists == wantRefused {
				t.Errorf("%s exists=%v, want %v", f, exists, !wantRefused)
			}
			os.Remove(filepath.Join(ws, f))
		}
	}
	runOnce(true)
	if code, out, errs := runWS(t, home, ws, "policy", "trust", "--yes"); code != 0 {
		t.Fatalf("policy trust: %d %s %s", code, out, errs)
	}
	runOnce(false)
	if err := os.WriteFile(policyFile, []byte(hostilePolicy+"# edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runOnce(true)
}

// waitUntil sleeps until the expiry of the only remembered grant, and a
// little more.
func waitForExpiry(t testing.TB, home, ws string) {
	t.Helper()
	_, out, _ := runWS(t.(*testing.T), home, ws, "grant", "ls", "--json")
	var gs []gate.TimedGrant
	if err := json.Unmarshal([]byte(out), &gs); err != nil || len(gs) != 1 {
		t.Fatalf("grant ls: %v %s", err, out)
	}
	time.Sleep(time.Until(gs[0].Expires) + 100*time.Millisecond)
}

// checkExpiredOnRecord: the grant is no longer listed, and its expiry and
// the refused call are on the audit log.
func checkExpiredOnRecord(t *testing.T, home, ws, tool string) {
	t.Helper()
	if _, out, _ := runWS(t, home, ws, "grant", "ls"); !strings.Contains(out, "no grants with an expiry") {
		t.Errorf("grant ls after the expiry: %s", out)
	}
	_, out, _ := runWS(t, home, ws, "audit", "ls", "--json")
	for _, want := range []string{`"tool": "grant.add"`, `"tool": "grant"`, `"outcome": "expired"`, `"outcome": "CAPABILITY_DENIED"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the audit log lacks %s:\n%s", want, out)
		}
	}
	if code, out, _ := runWS(t, home, ws, "audit", "verify"); code != 0 {
		t.Errorf("audit verify: %s", out)
	}
}

// TestGrantExpiresDuringRun: a grant added for a few seconds allows a
// model's call, and the same call after it expired, in the same run, is
// CAPABILITY_DENIED.
func TestGrantExpiresDuringRun(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	if code, out, errs := runWS(t, home, ws, "grant", "add", "fs.write:notes/**", "--for", "3s"); code != 0 {
		t.Fatalf("grant add: %s %s", out, errs)
	}
	if _, out, _ := runWS(t, home, ws, "grant", "ls"); !strings.Contains(out, "fs.write:notes/**") {
		t.Fatalf("grant ls: %s", out)
	}
	write := func(name string) llmtest.ToolCall {
		return llmtest.ToolCall{Name: "fs_write", Arguments: `{"path":"notes/` + name + `","content":"x"}`}
	}
	srv := llmtest.New(t,
		llmtest.Step{ToolCalls: []llmtest.ToolCall{write("before.txt")}},
		llmtest.Step{ToolCalls: []llmtest.ToolCall{write("after.txt")}, Check: func(t testing.TB, req openai.ChatCompletionRequest) {
			if res := toolResults(req); len(res) != 1 || !strings.Contains(res[0], `"success":true`) && !strings.Contains(res[0], `"success": true`) {
				t.Errorf("the call within the grant's time: %q", res)
			}
			waitForExpiry(t, home, ws)
		}},
		llmtest.Step{Content: "done", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
			if res := toolResults(req); len(res) != 2 || !strings.Contains(res[1], "CAPABILITY_DENIED") {
				t.Errorf("the call after the expiry: %q", res)
			}
		}},
	)
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("WARDEN_MODEL", "scripted")
	if code, out, errs := runWS(t, home, ws, "run", "write notes"); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(ws, "notes", "before.txt")); err != nil {
		t.Errorf("before.txt: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "notes", "after.txt")); err == nil {
		t.Error("after.txt was written after the grant expired")
	}
	checkExpiredOnRecord(t, home, ws, "fs_write")
}

// TestGrantExpiresWhileServing: the same inside one long `mcp serve`.
func TestGrantExpiresWhileServing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newMCPWorld(t)
	if err := os.MkdirAll(w.ws, 0o700); err != nil {
		t.Fatal(err)
	}
	ws, err := filepath.EvalSymlinks(w.ws)
	if err != nil {
		t.Fatal(err)
	}
	w.run("grant", "add", "fs.write:notes/**", "--for", "3s")
	session := w.stdio(ctx, mcp.NewClient(&mcp.Implementation{Name: "expiry", Version: "1"}, nil), nil)
	if res, env := mcpCallResult(t, ctx, session, "fs_write", `{"path":"notes/before.txt","content":"x"}`); res.IsError {
		t.Fatalf("fs_write within the grant's time: %+v", env.Error)
	}
	waitForExpiry(t, w.home, ws)
	res, env := mcpCallResult(t, ctx, session, "fs_write", `{"path":"notes/after.txt","content":"x"}`)
	if !res.IsError || env.Error == nil || env.Error.Code != tool.CodeCapabilityDenied {
		t.Fatalf("fs_write after the expiry: %+v", env)
	}
	session.Close()
	if _, err := os.Stat(filepath.Join(ws, "notes", "after.txt")); err == nil {
		t.Error("after.txt was written after the grant expired")
	}
	checkExpiredOnRecord(t, w.home, ws, "fs_write")
}

// TestPolicyTests: the example coding-agent policy passes its own tests;
// a policy whose test fails exits 1 naming its line.
func TestPolicyTests(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	example, err := filepath.Abs("../../examples/policies/coding-agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := runWS(t, home, ws, "policy", "test", example)
	if code != 0 || !strings.Contains(out, "tests, all pass") {
		t.Fatalf("policy test %s: %d\n%s\n%s", example, code, out, errs)
	}
	b, _ := os.ReadFile(example)
	p, err := policy.ParsePolicy(example, b)
	if err != nil || len(p.Tests) < 15 {
		t.Fatalf("the example has %d tests (%v); want at least 15", len(p.Tests), err)
	}
	bad := filepath.Join(ws, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`version: 1
grants: ["fs.read:**"]
rules:
  - {name: no-env, tool: fs_read, path: "**/.env", action: deny}
tests:
  - {tool: fs_read, args: {path: README.md}, expect: allow}
  - {name: env is readable, tool: fs_read, args: {path: .env}, expect: allow}
  - {tool: fs_read, args: {path: x/.env}, expect: deny, rule: no-env}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runWS(t, home, ws, "policy", "test", bad)
	if code != env.ExitFailed || !strings.Contains(out, "bad.yaml:7: test 2 FAILED") || !strings.Contains(out, "got deny") ||
		!strings.Contains(errs, "1 of 3 policy tests failed") {
		t.Fatalf("a failing test: %d\n%s\n%s", code, out, errs)
	}
	if code, out, _ := runWS(t, home, ws, "policy", "check", bad); code != env.ExitFailed || !strings.Contains(out, "bad.yaml:7") {
		t.Fatalf("policy check runs the tests too: %d %s", code, out)
	}
}
