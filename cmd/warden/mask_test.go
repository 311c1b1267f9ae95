package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
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

	"github.com/wardenrt/warden/cmd/warden/internal/mcpserver"
	"github.com/wardenrt/warden/internal/llmtest"
)

const (
	maskAWS = "AKIAIOSFODNN7EXAMPLE"
	maskGH  = "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"
	maskPW  = "s3cr3t-Pa55w0rd-x1"
	maskEnv = "APP=demo\nDEBUG=false\nAWS_ACCESS_KEY_ID=" + maskAWS + "\nGITHUB_TOKEN=" + maskGH + "\nDB_PASSWORD=" + maskPW + "\n"
)

var reMaskText = regexp.MustCompile(`\[REDACTED:[a-z0-9-]+:[0-9a-f]{4,16}\]`)

// noSecretIn fails if a secret of the .env is in any file under dir.
func noSecretIn(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			for _, s := range []string{maskAWS, maskGH, maskPW} {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("the secret %s reached %s", s, p)
				}
			}
		}
		return nil
	})
}

// TestRunMaskRoundTrip: `warden run` asked to set DEBUG=true in a .env
// that holds an AWS key, a GitHub token and a password. The model (a
// scripted OpenAI-compatible server) reads the file — masked, with a
// warning — and writes it back with the one line changed, masks and all:
// the three secrets are intact on disk, and no request to the model, no
// record in the store and no log line ever held them. `runs show` shows
// the warning.
func TestRunMaskRoundTrip(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, ".env"), []byte(maskEnv), 0o600); err != nil {
		t.Fatal(err)
	}
	noSecrets := func(t testing.TB, req openai.ChatCompletionRequest) {
		b, _ := json.Marshal(req)
		for _, s := range []string{maskAWS, maskGH, maskPW} {
			if bytes.Contains(b, []byte(s)) {
				t.Errorf("the model was sent the secret %s", s)
			}
		}
	}
	lastTool := func(req openai.ChatCompletionRequest) map[string]any {
		var view map[string]any
		for _, m := range req.Messages {
			if m.Role == "tool" {
				view = nil
				_ = json.Unmarshal([]byte(m.Content), &view)
			}
		}
		return view
	}
	srv := llmtest.New(t,
		llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "fs_read", Arguments: `{"path":".env"}`}}, Check: noSecrets},
		llmtest.Step{Check: noSecrets, Respond: func(t testing.TB, req openai.ChatCompletionRequest) llmtest.Step {
			view := lastTool(req)
			out, _ := view["output"].(string)
			warnings, _ := json.Marshal(view["warnings"])
			if len(reMaskText.FindAllString(out, -1)) != 3 || !strings.Contains(string(warnings), "secrets masked: 3 in the output") {
				t.Errorf("the model was shown %q with warnings %s", out, warnings)
			}
			args, _ := json.Marshal(map[string]string{"path": ".env", "content": strings.Replace(out, "DEBUG=false", "DEBUG=true", 1)})
			return llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "fs_write", Arguments: string(args)}}}
		}},
		llmtest.Step{Content: "DEBUG is now true.", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
			noSecrets(t, req)
			if view := lastTool(req); view["success"] != true {
				t.Errorf("fs_write: %v", view)
			}
		}},
	)
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("WARDEN_MODEL", "scripted")
	code, out, errs := runWS(t, home, ws, "--grant", "fs.write:**", "run", "set DEBUG=true in .env")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	got, _ := os.ReadFile(filepath.Join(ws, ".env"))
	if want := strings.Replace(maskEnv, "DEBUG=false", "DEBUG=true", 1); string(got) != want {
		t.Fatalf(".env on disk:\n%s\nwant\n%s", got, want)
	}
	id := regexp.MustCompile(`run (\w+) on scripted`).FindStringSubmatch(errs)
	if id == nil {
		t.Fatalf("no run id in %s", errs)
	}
	_, show, _ := runWS(t, home, ws, "runs", "show", id[1])
	if !strings.Contains(show, "warning (step 1, fs_read): secrets masked: 3 in the output (aws-access-key, github-token, password) on lines 3-5") {
		t.Errorf("runs show has no masking warning:\n%s", show)
	}
	dir := t.TempDir()
	if code, _, e := runWS(t, home, ws, "runs", "export", id[1], "--dir", dir); code != 0 {
		t.Fatalf("export: %s", e)
	}
	noSecretIn(t, home)
	noSecretIn(t, dir)
	// Replayed: the recording's masks are paired with the replay's own, so
	// the write that carried them back has the same outcome.
	code, out, errs = runWS(t, home, ws, "--grant", "fs.write:**", "runs", "replay", id[1])
	if code != 0 || !strings.Contains(out, "0 difference(s)") {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	noSecretIn(t, home)
}

// TestMCPMaskRoundTrip: a mask goes back within the MCP session it came
// from, and only there.
func TestMCPMaskRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newMCPWorld(t, "--grant", "fs.write:**")
	if err := os.WriteFile(filepath.Join(w.ws, ".env"), []byte(maskEnv), 0o600); err != nil {
		t.Fatal(err)
	}
	url, token := w.httpServe()
	a := w.httpSession(ctx, mcp.NewClient(&mcp.Implementation{Name: "a", Version: "1"}, nil), url, token)
	b := w.httpSession(ctx, mcp.NewClient(&mcp.Implementation{Name: "b", Version: "1"}, nil), url, token)
	readRes, read := mcpCallResult(t, ctx, a, "fs_read", `{"path":".env"}`)
	if !read.Success || len(reMaskText.FindAllString(read.Output, -1)) != 3 {
		t.Fatalf("fs_read: %+v", read)
	}
	// A client that passes only the text content to its model: the
	// output as it is, then the warnings, on lines of their own.
	text := resultText(readRes)
	rest, ok := strings.CutPrefix(text, read.Output)
	if !ok || len(read.Warnings) != 1 || !strings.HasPrefix(read.Warnings[0], "secrets masked: 3 in the output") ||
		rest != "\n"+mcpserver.MCPWarningsHeader+"\nwarning: "+read.Warnings[0]+"\n" {
		t.Fatalf("fs_read text content does not carry the warning:\n%s\nwarnings %q", text, read.Warnings)
	}
	args, _ := json.Marshal(map[string]string{"path": ".env", "content": strings.Replace(read.Output, "DEBUG=false", "DEBUG=true", 1)})
	// Another session: the masks are not its own.
	if _, res := mcpCallResult(t, ctx, b, "fs_write", string(args)); res.Success || res.Error == nil || res.Error.Code != "INVALID_INPUT" {
		t.Fatalf("another session's write: %+v", res)
	}
	if got, _ := os.ReadFile(filepath.Join(w.ws, ".env")); string(got) != maskEnv {
		t.Fatalf(".env changed:\n%s", got)
	}
	if _, res := mcpCallResult(t, ctx, a, "fs_write", string(args)); !res.Success {
		t.Fatalf("the session's own write: %+v", res.Error)
	}
	if got, _ := os.ReadFile(filepath.Join(w.ws, ".env")); string(got) != strings.Replace(maskEnv, "DEBUG=false", "DEBUG=true", 1) {
		t.Fatalf(".env:\n%s", got)
	}
	noSecretIn(t, w.home)
}

// TestShortURLPasswordsNeverRecorded: passwords of 4 and 7 bytes, as the
// user info of URLs in an http call's params, are masked in the call's
// outcome (what the model is shown), the audit record and the run's
// export, also where the call repeats them URL-encoded in the URL it
// fetched — a form the patterns do not know. (The model's own tool call,
// which it wrote, goes back to it as written.)
func TestShortURLPasswordsNeverRecorded(t *testing.T) {
	pws := []string{"Zq4x", "k7Vq2Rx"}
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "asked for "+r.URL.RawQuery)
	}))
	defer echo.Close()
	noPasswords := func(t testing.TB, where string, b []byte) {
		t.Helper()
		for _, pw := range pws {
			if bytes.Contains(b, []byte(pw)) {
				t.Errorf("the password %s reached %s", pw, where)
			}
		}
	}
	args, _ := json.Marshal(map[string]any{"method": "GET", "url": echo.URL + "/hook",
		"params": map[string]string{"a": "postgres://app:" + pws[0] + "@db.internal/prod", "b": "mysql://root:" + pws[1] + "@db/x"}})
	srv := llmtest.New(t,
		llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "http", Arguments: string(args)}}},
		llmtest.Step{Content: "Done.", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
			last := req.Messages[len(req.Messages)-1]
			if last.Role != "tool" || !strings.Contains(last.Content, "asked for") {
				t.Errorf("the http call's outcome: %s", last.Content)
			}
			noPasswords(t, "the outcome shown to the model", []byte(last.Content))
		}},
	)
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("WARDEN_MODEL", "scripted")
	home, ws := t.TempDir(), t.TempDir()
	code, out, errs := runWS(t, home, ws, "--grant", "net:"+strings.TrimPrefix(echo.URL, "http://"), "run", "--tools", "http", "fetch the hook")
	if code != 0 || srv.Remaining() != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	id := regexp.MustCompile(`run (\w+) on scripted`).FindStringSubmatch(errs)
	if id == nil {
		t.Fatalf("no run id in %s", errs)
	}
	dir := t.TempDir()
	if code, _, e := runWS(t, home, ws, "runs", "export", id[1], "--dir", dir); code != 0 {
		t.Fatalf("runs export: %s", e)
	}
	if code, _, e := runWS(t, home, ws, "audit", "export", "--out", filepath.Join(dir, "audit.jsonl")); code != 0 {
		t.Fatalf("audit export: %s", e)
	}
	for _, root := range []string{home, dir} {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				noPasswords(t, p, b)
			}
			return nil
		})
	}
	audit, _ := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if !bytes.Contains(audit, []byte("[REDACTED:url-password:")) && !bytes.Contains(audit, []byte("[REDACTED]")) {
		t.Errorf("no mask in the audit record:\n%s", audit)
	}
}
