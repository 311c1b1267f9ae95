package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	openai "github.com/sashabaranov/go-openai"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/internal/llmtest"
	"github.com/wardenrt/warden/internal/wasmfixture"
)

// hintCommand is the last `warden …` command in a refusal's hint (the
// text after " — "), split into words as a POSIX shell would (plain words
// and '…' quoting, which is all shellQuote writes).
func hintCommand(t *testing.T, stderr string) []string {
	t.Helper()
	_, hint, ok := strings.Cut(strings.TrimSpace(stderr), " — ")
	if !ok {
		t.Fatalf("no hint in %q", stderr)
	}
	i := strings.LastIndex(hint, "warden tool ")
	if i < 0 {
		t.Fatalf("the hint is no warden command: %q", hint)
	}
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range strings.TrimSuffix(hint[i:], "`") {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestInstallRefusalHintsWork: every refusal of `warden tool install` (and
// of approving a dropped-in module) names, as its hint, a command that
// resolves it — and running that very command works.
func TestInstallRefusalHintsWork(t *testing.T) {
	home := t.TempDir()
	runHint := func(stderr string) string {
		t.Helper()
		words := hintCommand(t, stderr)
		code, out, errs := runCLI(t, home, words[1:]...)
		if code != 0 {
			t.Fatalf("the hint %q failed: exit %d\n%s\n%s", strings.Join(words, " "), code, out, errs)
		}
		return out
	}
	bsky := wasmfixture.Stage(t, "compat/bsky", "", false)
	steps := []struct {
		args []string
		want string // in stderr
	}{
		// A tool name that is no OpenAI function name, and search, a core
		// tool's name.
		{[]string{"tool", "install", bsky}, `tool name "feed.timeline" of module bsky is invalid`},
		// The same module again.
		{[]string{"tool", "install", bsky}, `ALREADY_EXISTS: a module named bsky is already installed`},
		// A module name that is not a tool name.
		{[]string{"tool", "install", wasmfixture.Stage(t, "examples/textstats", "", false), "--name", "text stats"}, `module name "text stats" is invalid`},
	}
	for _, s := range steps {
		code, _, errs := runCLI(t, home, s.args...)
		if code == 0 || !strings.Contains(errs, s.want) {
			t.Fatalf("%v: exit %d, want %q in\n%s", s.args, code, s.want, errs)
		}
		runHint(errs)
	}
	// A tool named like another module's tool.
	if code, _, errs := runCLI(t, home, "tool", "install", wasmfixture.Stage(t, "examples/fetch", "", false)); code != 0 {
		t.Fatal(errs)
	}
	weather := wasmfixture.Stage(t, "compat/weather", "", false)
	code, _, errs := runCLI(t, home, "tool", "install", weather, "--grant", "net:127.0.0.1")
	if code != env.ExitUsage || !strings.Contains(errs, `tool name "fetch" of module weather is already provided by module fetch`) || !strings.Contains(errs, "--grant net:127.0.0.1 --prefix weather_") {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	runHint(errs)
	// A module dropped in by hand whose tool collides: approving it is
	// refused with the approve command that renames it.
	b, _ := os.ReadFile(weather)
	if err := os.WriteFile(filepath.Join(home, "tools", "w3.wasm"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCLI(t, home, "tool", "approve", "w3", "--yes")
	if code != env.ExitUsage || !strings.Contains(errs, "warden tool approve w3 --yes --prefix w3_") {
		t.Fatalf("approve w3: exit %d\n%s", code, errs)
	}
	runHint(errs)

	_, out, _ := runCLI(t, home, "tool", "ls")
	for _, want := range []string{
		"bsky_search,bsky_get_profile,bsky_feed_timeline", "bsky2_search,bsky2_get_profile,bsky2_feed_timeline",
		"text_stats ", "weather_fetch", "w3_fetch",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tool ls lacks %s:\n%s", want, out)
		}
	}
	// inspect says how the tools are served.
	_, out, _ = runCLI(t, home, "tool", "inspect", "bsky")
	for _, want := range []string{
		"exposed as bsky_search; the module calls it search", "closed (additionalProperties: false) at #, #/properties/filters",
		"left open: #/properties/extra: free-form object", "repaired: #: moved the required list found inside properties",
		`repaired: #/properties/feed: draft-03 "required": true`, "module's schema:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tool inspect lacks %q:\n%s", want, out)
		}
	}
}

// TestConfigSecretNeverRecorded: a servlet reads its API key through
// `warden tool config weather API_KEY=env:VAR` and sends it with an
// http_request to a local server (granted by IP:port). The guest echoes
// the key in its result, logs it and prints it: the key appears 0 times in
// warden.db, the logs, the audit export and the run's artifacts. The same
// `warden run` (a scripted model) is offered the renamed tools of another
// published servlet and calls them.
func TestConfigSecretNeverRecorded(t *testing.T) {
	const secret = "wk_live_9d8c7b6a5f4e3d2c1b0a"
	t.Setenv("WX_SERVICE_ID", secret)
	var gotKey string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey = r.Header.Get("X-Api-Key")
		w.Header().Set("X-Request-Id", "req-7")
		w.Write([]byte(`{"temp_c":19}`))
	}))
	defer srv.Close()
	netGrant := "net:" + strings.TrimPrefix(srv.URL, "http://")
	home, ws := t.TempDir(), t.TempDir()
	must := func(args ...string) string {
		t.Helper()
		code, out, errs := runWS(t, home, ws, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errs)
		}
		return out + errs
	}
	must("tool", "install", wasmfixture.Stage(t, "compat/weather", "", false), "--grant", netGrant)
	out := must("tool", "config", "weather", "API_KEY=env:WX_SERVICE_ID", "BASE_URL="+srv.URL)
	if !strings.Contains(out, "warden tool grant weather env:WX_SERVICE_ID") || strings.Contains(out, secret) {
		t.Fatalf("tool config: %s", out)
	}
	must("tool", "grant", "weather", "env:WX_SERVICE_ID")
	out = must("tool", "inspect", "weather")
	if !strings.Contains(out, "API_KEY (owner: from env:WX_SERVICE_ID at each call)") || !strings.Contains(out, "BASE_URL (owner)") || strings.Contains(out, secret) {
		t.Fatalf("tool inspect:\n%s", out)
	}
	must("tool", "install", wasmfixture.Stage(t, "compat/bsky", "", false), "--prefix", "bsky_", "--alias", "feed.timeline=bsky_timeline")

	// What warden lists is the schema as it enforces it.
	var listed []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if code, out, _ := runWS(t, home, ws, "tools", "--json"); code != 0 || json.Unmarshal([]byte(out), &listed) != nil {
		t.Fatalf("tools --json: %s", out)
	}
	enforced := false
	for _, l := range listed {
		var c bytes.Buffer
		json.Compact(&c, l.InputSchema)
		if l.Name == "bsky_search" {
			enforced = bytes.Contains(c.Bytes(), []byte(`"filters":{"additionalProperties":false`))
		}
	}
	if !enforced {
		t.Errorf("tools --json does not list bsky_search with its enforced schema")
	}
	out = must("--grant", netGrant, "--grant", "env:WX_SERVICE_ID", "call", "fetch", "--args", `{"city":"Oslo","echo_key":true}`)
	if gotKey != secret || !strings.Contains(out, `\"request_id\":\"req-7\"`) || !strings.Contains(out, `\"key\":\"[REDACTED:env-secret:`) {
		t.Fatalf("call fetch (the service got %q):\n%s", gotKey, out)
	}

	// A scripted model is offered the renamed tools and the servlet's
	// fetch, and calls them.
	llm := llmtest.New(t,
		llmtest.Step{ToolCalls: []llmtest.ToolCall{
			{Name: "bsky_search", Arguments: `{"q":"wasm"}`},
			{Name: "bsky_timeline", Arguments: `{"feed":"home","Cursor":"x"}`},
			{Name: "fetch", Arguments: `{"city":"Bergen","echo_key":true}`},
		}, Check: func(t testing.TB, req openai.ChatCompletionRequest) {
			offered := map[string]string{}
			for _, tl := range req.Tools {
				b, _ := json.Marshal(tl.Function.Parameters)
				offered[tl.Function.Name] = string(b)
			}
			for _, name := range []string{"bsky_search", "bsky_get_profile", "bsky_timeline", "fetch"} {
				if !strings.Contains(offered[name], `"additionalProperties":false`) {
					t.Errorf("%s offered with %q", name, offered[name])
				}
			}
			if _, ok := offered["search"]; !ok {
				t.Error("the core search is not offered")
			}
		}},
		llmtest.Step{Content: "done", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
			var results []string
			for _, m := range req.Messages {
				if m.Role == "tool" {
					results = append(results, m.Content)
				}
			}
			if len(results) != 3 || !strings.Contains(results[0], "first post about wasm") || !strings.Contains(results[1], "INVALID_INPUT") ||
				!strings.Contains(results[2], "req-7") || strings.Contains(strings.Join(results, " "), secret) {
				t.Errorf("tool results %q", results)
			}
		}},
	)
	t.Setenv("OPENAI_BASE_URL", llm.URL)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("WARDEN_MODEL", "scripted")
	out = must("--grant", netGrant, "--grant", "env:WX_SERVICE_ID", "run", "weather in Bergen, and posts about wasm")
	id := regexp.MustCompile(`run (\w+) on scripted`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no run id:\n%s", out)
	}
	exp := t.TempDir()
	must("runs", "export", id[1], "--dir", exp)
	must("audit", "export", "--out", filepath.Join(exp, "audit.jsonl"))

	// Nothing anywhere holds the secret.
	found := 0
	for _, root := range []string{home, exp} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err == nil && bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the secret", p)
				found++
			}
			return nil
		})
	}
	logs, _ := filepath.Glob(filepath.Join(home, "logs", "*.log"))
	all := []byte{}
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		all = append(all, b...)
	}
	if found != 0 || !bytes.Contains(all, []byte("weather: key [REDACTED]")) {
		t.Fatalf("%d files hold the secret; the guest's stderr in the log: %v", found, bytes.Contains(all, []byte("weather: key")))
	}
	if files, _ := filepath.Glob(filepath.Join(exp, id[1], "tool-outputs", "*")); len(files) != 3 {
		t.Fatalf("artifacts %v", files)
	}
}

// TestMCPServesRenamedPublishedTools: `warden mcp serve` lists a published
// servlet's tools under the names chosen at install, with the schemas as
// warden enforces them, and calls them (the guest gets its own names).
func TestMCPServesRenamedPublishedTools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newMCPWorld(t)
	w.run("tool", "install", wasmfixture.Stage(t, "compat/bsky", "", false), "--prefix", "bsky_", "--alias", "feed.timeline=timeline")
	session := w.stdio(ctx, mcp.NewClient(&mcp.Implementation{Name: "dropin", Version: "1"}, nil), nil)
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, tl := range tools.Tools {
		b, _ := json.Marshal(tl.InputSchema)
		listed[tl.Name] = string(b)
	}
	for _, name := range []string{"bsky_search", "bsky_get_profile", "timeline"} {
		if !strings.Contains(listed[name], `"additionalProperties":false`) {
			t.Errorf("%s listed with %q", name, listed[name])
		}
	}
	if _, ok := listed["feed.timeline"]; ok {
		t.Error("the module's own name is listed")
	}
	res, env := mcpCallResult(t, ctx, session, "bsky_search", `{"q":"mcp"}`)
	if res.IsError || !env.Success || !strings.Contains(resultText(res), `"tool":"search"`) {
		t.Fatalf("bsky_search: %+v", env)
	}
	res, env = mcpCallResult(t, ctx, session, "timeline", `{"feed":"home","limit":2}`)
	if res.IsError || !strings.Contains(resultText(res), `"tool":"feed.timeline"`) {
		t.Fatalf("timeline: %+v", env)
	}
	res, env = mcpCallResult(t, ctx, session, "bsky_search", `{"q":"x","Q":"y"}`)
	if !res.IsError || env.Error == nil || env.Error.Code != "INVALID_INPUT" {
		t.Fatalf("a case-variant field: %+v", env)
	}
	session.Close()
	w.checkAudit("mcp:dropin", 3)
}
