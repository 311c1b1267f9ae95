package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/mcpserver"
	"github.com/wardenrt/warden/internal/wasmfixture"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// mcpWorld is a home and a workspace (with a.txt) for a served warden.
type mcpWorld struct {
	t         *testing.T
	bin       string
	home, ws  string
	extraArgs []string
}

func newMCPWorld(t *testing.T, extra ...string) *mcpWorld {
	t.Helper()
	bin, err := exec.LookPath("warden") // this test binary as warden (TestMain)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := &mcpWorld{t: t, bin: bin, home: filepath.Join(dir, "home"), ws: filepath.Join(dir, "ws"), extraArgs: extra}
	if err := os.MkdirAll(w.ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.ws, "a.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	return w
}

// command is warden with the world's home, workspace and extra flags.
func (w *mcpWorld) command(args ...string) *exec.Cmd {
	all := append([]string{"--home", w.home, "--workspace", w.ws}, w.extraArgs...)
	cmd := exec.Command(w.bin, append(all, args...)...)
	cmd.Env = append(os.Environ(), "WARDEN_APPROVE=", "WARDEN_LOG_LEVEL="+mcpTestLogLevel, mcpserver.EnvMCPToken+"=")
	return cmd
}

func (w *mcpWorld) run(args ...string) string {
	w.t.Helper()
	out, err := w.command(args...).CombinedOutput()
	if err != nil {
		w.t.Fatalf("warden %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// stdio connects client to `warden mcp serve` over stdio.
func (w *mcpWorld) stdio(ctx context.Context, client *mcp.Client, opts *mcp.ClientSessionOptions, args ...string) *mcp.ClientSession {
	w.t.Helper()
	cmd := w.command(append([]string{"mcp", "serve"}, args...)...)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, opts)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { session.Close(); cmd.Wait() })
	return session
}

// httpServe starts `warden mcp serve --http 127.0.0.1:0 ARGS` and returns
// its URL and token, from what it prints.
func (w *mcpWorld) httpServe(args ...string) (url, token string) {
	w.t.Helper()
	token = "test-token-" + strings.Repeat("x", 24)
	cmd := w.command(append([]string{"mcp", "serve", "--http", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(cmd.Env, mcpserver.EnvMCPToken+"="+token)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	reURL := regexp.MustCompile(`at (http://\S+/mcp)$`)
	fromEnv := false
	for (url == "" || !fromEnv) && sc.Scan() {
		if m := reURL.FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
		fromEnv = fromEnv || strings.Contains(sc.Text(), "bearer token from "+mcpserver.EnvMCPToken)
		if strings.Contains(sc.Text(), token) {
			w.t.Fatalf("the token was printed: %s", sc.Text())
		}
	}
	if url == "" || !fromEnv {
		w.t.Fatalf("mcp serve --http printed no URL and token source (%v)", sc.Err())
	}
	go func() {
		for sc.Scan() {
			if os.Getenv("MCP_TEST_LOG") != "" {
				w.t.Log(sc.Text())
			}
		}
	}()
	return url, token
}

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func (w *mcpWorld) httpSession(ctx context.Context, client *mcp.Client, url, token string) *mcp.ClientSession {
	w.t.Helper()
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { session.Close() })
	return session
}

// mcpCallResult calls a tool and decodes the envelope from the structured
// content.
func mcpCallResult(t *testing.T, ctx context.Context, s *mcp.ClientSession, name, args string) (*mcp.CallToolResult, tool.Result) {
	t.Helper()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var env tool.Result
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("%s: structured content %s: %v", name, b, err)
	}
	return res, env
}

func resultText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// checkMCPBasics lists the tools (each with the registry's own schema) and
// makes a successful call, a denied call, a call with an invalid argument
// and a call needing an approval the client cannot give (it does not
// support elicitation).
func checkMCPBasics(t *testing.T, ctx context.Context, w *mcpWorld, session *mcp.ClientSession) {
	t.Helper()
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := newTestRegistry(t)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tl := range tools.Tools {
		seen[tl.Name] = true
		tool, ok := reg.Lookup(tl.Name)
		if !ok {
			t.Errorf("listed %s, which the registry does not have", tl.Name)
			continue
		}
		got, _ := json.Marshal(tl.InputSchema)
		if !jsonEqualBytes(got, tool.Spec().InputSchema) {
			t.Errorf("%s: schema re-derived:\n%s\n%s", tl.Name, got, tool.Spec().InputSchema)
		}
	}
	if len(tools.Tools) != reg.Len() || !seen["system"] || !seen["fs_read"] || !seen["workflow_run"] {
		t.Fatalf("%d tools listed, registry has %d", len(tools.Tools), reg.Len())
	}
	if res, env := mcpCallResult(t, ctx, session, "fs_read", `{"path":"a.txt"}`); res.IsError || !env.Success || !strings.Contains(resultText(res), "hello") {
		t.Fatalf("fs_read: %+v %+v", res, env)
	}
	// Outside the workspace: no world grants it.
	outside := filepath.Join(filepath.Dir(w.ws), "b.txt")
	for _, tt := range []struct {
		tool, args string
		code       tool.Code
	}{
		{"fs_write", `{"path":"` + outside + `","content":"x"}`, tool.CodeCapabilityDenied},
		{"fs_read", `{"path":"a.txt","Path":"b"}`, tool.CodeInvalidInput},
		{"shell", `{"command":"touch noelicit"}`, tool.CodeApprovalRequired},
	} {
		res, env := mcpCallResult(t, ctx, session, tt.tool, tt.args)
		if !res.IsError || env.Error == nil || env.Error.Code != tt.code || !strings.HasPrefix(resultText(res), string(tt.code)) {
			t.Errorf("%s: isError %v, %+v", tt.tool, res.IsError, env.Error)
			continue
		}
		// The client is told what to ask the user for, in the text and the
		// structured result alike, and never a flag of warden's CLI.
		text := resultText(res)
		switch tt.code {
		case tool.CodeCapabilityDenied:
			want := "ask the user to grant " + env.Error.Missing[0]
			if len(env.Error.Missing) != 1 || !strings.Contains(text, want) || !strings.HasPrefix(env.Error.Hint, want) {
				t.Errorf("%s: %q, %+v", tt.tool, text, env.Error)
			}
		case tool.CodeApprovalRequired:
			if env.Error.Approval == nil || !strings.Contains(text, "the user must approve this call") {
				t.Errorf("%s: %q, %+v", tt.tool, text, env.Error)
			}
		}
		for _, flag := range []string{"--grant", "--approve", "--args"} {
			if strings.Contains(text, flag) || strings.Contains(env.Error.Hint, flag) {
				t.Errorf("%s: the client is told of %s: %q", tt.tool, flag, text)
			}
		}
	}
	for _, f := range []string{outside, filepath.Join(w.ws, "noelicit")} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s was written by a refused call", f)
		}
	}
}

// checkAudit: at least n records as principal, and the log verifies.
func (w *mcpWorld) checkAudit(principal string, n int) {
	w.t.Helper()
	out := w.run("audit", "ls")
	if got := strings.Count(out, principal); got < n {
		w.t.Errorf("%d audit records as %s, want ≥ %d:\n%s", got, principal, n, out)
	}
	w.run("audit", "verify")
}

// TestMCPServeStdio drives `warden mcp serve` — a real subprocess over
// stdio — with the MCP SDK's client: tools are listed with the registry's
// own schemas; a call succeeds; a denied call, an invalid argument and a
// call needing an approval no one can give are results with isError and
// their code; the audit resources read back; every call is on the audit
// log as mcp:<client name>.
func TestMCPServeStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newMCPWorld(t, "--grant", "exec:touch", "--grant", "fs.write:**")
	session := w.stdio(ctx, mcp.NewClient(&mcp.Implementation{Name: "test client/1", Version: "1"}, nil), nil, "--resources")
	checkMCPBasics(t, ctx, w, session)

	// Resources: the recent audit records (the calls above), one record,
	// and a run that does not exist.
	rr, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "warden://audit/recent"})
	if err != nil {
		t.Fatal(err)
	}
	var recs []struct {
		Seq   uint64
		Event struct{ Tool string }
	}
	if err := json.Unmarshal([]byte(rr.Contents[0].Text), &recs); err != nil || len(recs) < 4 {
		t.Fatalf("warden://audit/recent: %v, %s", err, rr.Contents[0].Text)
	}
	one, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "warden://audit/1"})
	if err != nil || !strings.Contains(one.Contents[0].Text, `"seq": 1`) {
		t.Fatalf("warden://audit/1: %v %+v", err, one)
	}
	for _, uri := range []string{"warden://runs/nosuchrun", "warden://audit/999999", "warden://audit/x"} {
		if _, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("%s: read", uri)
		}
	}
	if rr, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "warden://runs"}); err != nil || strings.TrimSpace(rr.Contents[0].Text) != "[]" {
		t.Errorf("warden://runs: %v %+v", err, rr)
	}
	session.Close()
	w.checkAudit("mcp:test_client_1", 4)
	if out := w.run("audit", "ls", "--tool", "mcp_resource"); strings.Count(out, "mcp:test_client_1") < 6 {
		t.Errorf("resource reads not audited:\n%s", out)
	}

	// Without --resources there are none.
	plain := w.stdio(ctx, mcp.NewClient(&mcp.Implementation{Name: "plain", Version: "1"}, nil), nil)
	if _, err := plain.ReadResource(ctx, &mcp.ReadResourceParams{URI: "warden://audit/recent"}); err == nil {
		t.Error("warden://audit/recent served without --resources")
	}
}

// TestMCPApprovalByElicitation: a call whose rule requires approval asks
// the person through the client (elicitation), showing the tool and the
// arguments; accepted it runs once, declined it is USER_REJECTED; this
// works for clients on the multi-round-trip protocol and on 2025-11-25
// (where warden's server sends the elicitation request itself).
func TestMCPApprovalByElicitation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newMCPWorld(t, "--grant", "exec:touch", "--grant", "fs.write:**")
	var mu sync.Mutex
	var asked []string
	answer := "accept"
	client := mcp.NewClient(&mcp.Implementation{Name: "asker", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, r.Params.Message)
			if answer == "accept" {
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}
			return &mcp.ElicitResult{Action: answer}, nil
		},
	})
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("protocol "+version, func(t *testing.T) {
			session := w.stdio(ctx, client, &mcp.ClientSessionOptions{ProtocolVersion: version})
			mu.Lock()
			answer, asked = "accept", nil
			mu.Unlock()
			file := "approved" + strings.ReplaceAll(version, "-", "")
			res, env := mcpCallResult(t, ctx, session, "shell", `{"command":"touch `+file+`"}`)
			if res.IsError || !env.Success {
				t.Fatalf("approved shell: %s %+v", resultText(res), env.Error)
			}
			if _, err := os.Stat(filepath.Join(w.ws, file)); err != nil {
				t.Fatalf("the approved call did not run: %v", err)
			}
			mu.Lock()
			if len(asked) != 1 || !strings.Contains(asked[0], "wants to call shell") || !strings.Contains(asked[0], "touch "+file) {
				t.Errorf("asked %q", asked)
			}
			answer = "decline"
			mu.Unlock()
			res, env = mcpCallResult(t, ctx, session, "shell", `{"command":"touch declined"}`)
			if !res.IsError || env.Error == nil || env.Error.Code != tool.CodeUserRejected {
				t.Fatalf("declined shell: %s %+v", resultText(res), env.Error)
			}
			mu.Lock()
			answer = "cancel"
			mu.Unlock()
			if _, env = mcpCallResult(t, ctx, session, "shell", `{"command":"touch cancelled"}`); env.Error == nil || env.Error.Code != tool.CodeUserCancelled {
				t.Fatalf("cancelled shell: %+v", env.Error)
			}
			for _, f := range []string{"declined", "cancelled"} {
				if _, err := os.Stat(filepath.Join(w.ws, f)); err == nil {
					t.Fatalf("a %s call ran", f)
				}
			}
		})
	}
	t.Run("what is shown", func(t *testing.T) {
		session := w.stdio(ctx, client, nil)
		mu.Lock()
		answer, asked = "accept", nil
		mu.Unlock()
		// Too long to show in full: not asked, refused.
		long := `{"command":"touch ok` + strings.Repeat(" ", 5000) + `; touch hidden"}`
		if _, env := mcpCallResult(t, ctx, session, "shell", long); env.Error == nil || env.Error.Code != tool.CodeApprovalRequired ||
			!strings.Contains(env.Error.Message, "too long to show") {
			t.Errorf("a call too long to show: %+v", env.Error)
		}
		// A bidi override is shown escaped.
		if _, env := mcpCallResult(t, ctx, session, "shell", `{"command":"touch bidi\u202e"}`); env.Error != nil && env.Error.Code == tool.CodeApprovalRequired {
			t.Errorf("bidi: %+v", env.Error)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(asked) != 1 || strings.ContainsRune(asked[0], '\u202e') || !strings.Contains(asked[0], `\u202e`) {
			t.Errorf("asked %q", asked)
		}
		if _, err := os.Stat(filepath.Join(w.ws, "hidden")); err == nil {
			t.Error("the hidden part ran")
		}
	})
	// A legacy client that does not handle multi-round-trip calling the
	// tool by its alias (run for shell) is asked, and the call runs.
	t.Run("alias, legacy client", func(t *testing.T) {
		var n int
		legacy := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, &mcp.ClientOptions{
			MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
			ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				n++
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
			}})
		s := w.stdio(ctx, legacy, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		res, env := mcpCallResult(t, ctx, s, "run", `{"command":"touch viaalias"}`)
		if n != 1 || res.IsError {
			t.Fatalf("asked %d times; %s %+v", n, resultText(res), env.Error)
		}
		if _, err := os.Stat(filepath.Join(w.ws, "viaalias")); err != nil {
			t.Fatal("the approved alias call did not run")
		}
	})
	out := w.run("audit", "ls")
	if !strings.Contains(out, "mcp:asker") || !strings.Contains(out, "mcp:legacy") {
		t.Errorf("no record as mcp:asker or mcp:legacy:\n%s", out)
	}
	w.run("audit", "verify")
}

// TestMCPApprovalPolicyNever: a policy whose approval is never keeps it
// under mcp serve: nobody is asked.
func TestMCPApprovalPolicyNever(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := newMCPWorld(t, "--grant", "exec:touch", "--grant", "fs.write:**")
	policy := filepath.Join(w.ws, ".warden", "policy.yaml")
	if err := os.MkdirAll(filepath.Dir(policy), 0o700); err != nil {
		t.Fatal(err)
	}
	b := []byte("version: 1\napproval: never\ngrants: [\"fs.read:**\"]\nrules:\n  - {tool: shell, action: allow, require_approval: true}\n")
	if err := os.WriteFile(policy, b, 0o600); err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "asker", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			t.Error("asked, under a policy that says never")
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
		}})
	s := w.stdio(ctx, client, nil)
	if _, env := mcpCallResult(t, ctx, s, "shell", `{"command":"touch never"}`); env.Error == nil || env.Error.Code != tool.CodeApprovalRequired {
		t.Fatalf("%+v", env.Error)
	}
}

// TestMCPApprovalStateHostile: a client that answers warden's approval
// request itself (multi-round-trip, by hand) cannot use the answer for
// another call, another argument, twice, or with a state warden never
// issued; each is APPROVAL_REQUIRED and runs nothing.
func TestMCPApprovalStateHostile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newMCPWorld(t, "--grant", "exec:touch", "--grant", "fs.write:**")
	client := mcp.NewClient(&mcp.Implementation{Name: "byhand", Version: "1"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			t.Error("the client's handler was called: the test answers by hand")
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	session := w.stdio(ctx, client, nil)
	args := json.RawMessage(`{"command":"touch good"}`)
	first, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "shell", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	el, ok := first.InputRequests[mcpserver.ApprovalInput].(*mcp.ElicitParams)
	if !first.NeedsInput() || !ok || first.RequestState == "" || !strings.Contains(el.Message, "touch good") {
		t.Fatalf("first pass: needs input %v, %+v", first.NeedsInput(), first)
	}
	yes := mcp.InputResponseMap{mcpserver.ApprovalInput: &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}}
	call := func(name string, args json.RawMessage, state string, resp mcp.InputResponseMap) tool.Result {
		t.Helper()
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, RequestState: state, InputResponses: resp})
		if err != nil {
			t.Fatal(err)
		}
		var env tool.Result
		b, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(b, &env)
		return env
	}
	for _, tc := range []struct {
		what  string
		args  string
		state string
		resp  mcp.InputResponseMap
	}{
		{"a state never issued", `{"command":"touch forged"}`, "00112233445566778899aabbccddeeff", yes},
		{"another argument", `{"command":"touch other"}`, first.RequestState, yes},
	} {
		if env := call("shell", json.RawMessage(tc.args), tc.state, tc.resp); env.Error == nil || env.Error.Code != tool.CodeApprovalRequired {
			t.Errorf("%s: %+v", tc.what, env.Error)
		}
	}
	// "another argument" used the state up: the right call with it is
	// refused too; a fresh round approves it, once.
	if env := call("shell", args, first.RequestState, yes); env.Error == nil || env.Error.Code != tool.CodeApprovalRequired {
		t.Errorf("a used state: %+v", env.Error)
	}
	second, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "shell", Arguments: args})
	if err != nil || !second.NeedsInput() {
		t.Fatalf("second round: %v %+v", err, second)
	}
	if env := call("shell", args, second.RequestState, yes); !env.Success {
		t.Fatalf("approved by hand: %+v", env.Error)
	}
	if env := call("shell", args, second.RequestState, yes); env.Error == nil || env.Error.Code != tool.CodeApprovalRequired {
		t.Errorf("the same answer twice: %+v", env.Error)
	}
	for _, f := range []string{"forged", "other"} {
		if _, err := os.Stat(filepath.Join(w.ws, f)); err == nil {
			t.Errorf("%s ran", f)
		}
	}
}

// TestMCPServeHTTP drives `warden mcp serve --http` with the SDK's
// streamable HTTP client: the same basics as over stdio; a request without
// the token, with a wrong token, a foreign Origin or Host, or a body over
// the limit is refused before MCP sees it; and a wasm tool installed while
// serving is announced (tools/list_changed) and callable, then gone when
// removed.
func TestMCPServeHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	w := newMCPWorld(t, "--grant", "exec:touch", "--grant", "fs.write:**")
	url, token := w.httpServe("--max-request-bytes", "65536", "--reload-interval", "200ms")

	raw := func(mutate func(*http.Request)) int {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		mutate(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := raw(func(*http.Request) {}); code != http.StatusOK {
		t.Fatalf("a proper request: %d", code)
	}
	for _, tc := range []struct {
		what   string
		mutate func(*http.Request)
		want   int
	}{
		{"no token", func(r *http.Request) { r.Header.Del("Authorization") }, http.StatusUnauthorized},
		{"wrong token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token+"x") }, http.StatusUnauthorized},
		{"token in another scheme", func(r *http.Request) { r.Header.Set("Authorization", "Basic "+token) }, http.StatusUnauthorized},
		{"foreign Origin", func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") }, http.StatusForbidden},
		{"its own Origin", func(r *http.Request) { r.Header.Set("Origin", "http://"+r.URL.Host) }, http.StatusForbidden},
		{"rebound Host", func(r *http.Request) { r.Host = "evil.example:80" }, http.StatusForbidden},
		{"another loopback Host", func(r *http.Request) { r.Host = "127.0.0.2:" + r.URL.Port() }, http.StatusForbidden},
		{"GET without the token", func(r *http.Request) { r.Method = http.MethodGet; r.Header.Del("Authorization") }, http.StatusUnauthorized},
		{"DELETE without the token", func(r *http.Request) { r.Method = http.MethodDelete; r.Header.Del("Authorization") }, http.StatusUnauthorized},
		{"oversized body", func(r *http.Request) {
			big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 70000) + `"}}`
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(big)), int64(len(big))
		}, http.StatusRequestEntityTooLarge},
	} {
		if code := raw(tc.mutate); code != tc.want {
			t.Errorf("%s: HTTP %d, want %d", tc.what, code, tc.want)
		}
	}

	// An approval over HTTP (the stateful streamable transport: the
	// server sends the elicitation request).
	asker := mcp.NewClient(&mcp.Implementation{Name: "http asker", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
		}})
	if res, env := mcpCallResult(t, ctx, w.httpSession(ctx, asker, url, token), "shell", `{"command":"touch viahttp"}`); res.IsError {
		t.Fatalf("approved over HTTP: %+v", env.Error)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "viahttp")); err != nil {
		t.Fatal("the approved call over HTTP did not run")
	}

	changed := make(chan struct{}, 16)
	client := mcp.NewClient(&mcp.Implementation{Name: "http client", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	session := w.httpSession(ctx, client, url, token)
	checkMCPBasics(t, ctx, w, session)

	// Install textstats from another process while serving.
	w.run("tool", "install", wasmfixture.Stage(t, "examples/textstats", "", false))
	hasTool := func(name string) bool {
		tools, err := session.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range tools.Tools {
			if tl.Name == name {
				return true
			}
		}
		return false
	}
	waitChanged := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(30 * time.Second):
			t.Fatalf("no tools/list_changed after %s", what)
		}
	}
	waitChanged("install")
	if !hasTool("textstats") {
		t.Fatal("textstats not listed after install")
	}
	res, env := mcpCallResult(t, ctx, session, "textstats", `{"text":"one two three. four"}`)
	if res.IsError || !env.Success || !bytes.Contains(env.Data, []byte(`"words":4`)) {
		t.Fatalf("textstats: %s %+v %s", resultText(res), env.Error, env.Data)
	}
	w.run("tool", "rm", "textstats")
	waitChanged("rm")
	if hasTool("textstats") {
		t.Fatal("textstats still listed after rm")
	}
	if res, env := mcpCallResult(t, ctx, session, "textstats", `{"text":"x"}`); !res.IsError || env.Error == nil || env.Error.Code != tool.CodeUnknownTool {
		t.Fatalf("textstats after rm: %+v", env.Error)
	}
	session.Close()
	w.checkAudit("mcp:http_client", 6)
}

// TestMCPRevokeWhileServing: a grant revoked from a wasm tool (`warden
// tool revoke` in another process) stops applying while the server runs,
// without a restart; the tool list does not change, so nothing is
// announced.
func TestMCPRevokeWhileServing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newMCPWorld(t, "--grant", "memory.write:notes")
	w.run("tool", "install", wasmfixture.Stage(t, "examples/notes", "", false), "--grant", "memory.write:notes", "--grant", "memory.read:notes")
	session := w.stdio(ctx, mcp.NewClient(&mcp.Implementation{Name: "revoker", Version: "1"}, nil), nil, "--reload-interval", "100ms")
	if res, env := mcpCallResult(t, ctx, session, "notes", `{"op":"add","key":"k1","text":"before"}`); res.IsError {
		t.Fatalf("notes add before the revocation: %+v", env.Error)
	}
	w.run("tool", "revoke", "notes", "memory.write:notes")
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, env := mcpCallResult(t, ctx, session, "notes", `{"op":"add","key":"k2","text":"after"}`)
		if res.IsError {
			// The guest's warden_call was denied; the guest reports it.
			if env.Error == nil || !strings.Contains(env.Error.Message, "CAPABILITY_DENIED: write_memory needs memory.write:notes") {
				t.Fatalf("after the revocation: %+v", env.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the revoked grant still applies")
		}
		time.Sleep(50 * time.Millisecond)
	}
	session.Close()
	if out := w.run("memory", "ls", "--ns", "notes"); !strings.Contains(out, "k1") {
		t.Errorf("memory: %s", out)
	}
}

// TestMCPServeHTTPRefusals: beyond loopback only with --allow-remote; a
// token from the environment must be long enough; the HTTP-only flags
// need --http.
func TestMCPServeHTTPRefusals(t *testing.T) {
	w := newMCPWorld(t)
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"mcp", "serve", "--http", "0.0.0.0:0"}, "", "not a loopback address"},
		{[]string{"mcp", "serve", "--http", "127.0.0.1:0"}, mcpserver.EnvMCPToken + "=short", "too short"},
		{[]string{"mcp", "serve", "--http", "127.0.0.1:0"}, "", "prints a generated one only on a terminal"},
		{[]string{"mcp", "serve", "--allow-remote"}, "", "are for --http"},
		{[]string{"--approve", "auto", "mcp", "serve"}, "WARDEN_APPROVE=auto", "only from its command line"},
	} {
		cmd := w.command(tc.args...)
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != env.ExitUsage || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: %v\n%s", tc.args, err, out)
		}
	}
}

// newTestRegistry is the registry `warden tools` shows on a fresh home.
func newTestRegistry(t *testing.T) (*gate.Registry, error) {
	e := env.ForHome(t.TempDir(), t.TempDir())
	return e.CoreRegistry()
}

func jsonEqualBytes(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// mcpTestLogLevel is the served warden's log level: warn, or $MCP_TEST_LOG
// (its log lines then go to the test's log).
var mcpTestLogLevel = func() string {
	if l := os.Getenv("MCP_TEST_LOG"); l != "" {
		return l
	}
	return "warn"
}()
