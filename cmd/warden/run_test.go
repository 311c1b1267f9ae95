package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/internal/llmtest"
)

// runWS runs warden in-process with a home and a workspace.
func runWS(t *testing.T, home, ws string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"warden", "--home", home, "--workspace", ws}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestRunRecordsAndExports: `warden run` against a scripted
// OpenAI-compatible server: the task is done through the gate, the shell
// call the default policy requires approval for is refused with no TTY
// (APPROVAL_REQUIRED, the model is told, nothing hangs), the run is
// recorded, `runs show` and `audit ls --run` agree, and the export holds
// everything with the secret in the task redacted.
func TestRunRecordsAndExports(t *testing.T) {
	const secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	home, ws := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "todo.txt"), []byte("buy milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := llmtest.New(t,
		llmtest.Step{Content: "Let me look.", ToolCalls: []llmtest.ToolCall{{Name: "fs_read", Arguments: `{"path":"todo.txt"}`}, {Name: "shell", Arguments: `{"command":"git status"}`}},
			Check: func(t testing.TB, req openai.ChatCompletionRequest) {
				if !strings.Contains(req.Messages[0].Content, "fs.read:**") {
					t.Errorf("the system prompt does not state the grants:\n%s", req.Messages[0].Content)
				}
			}},
		llmtest.Step{Content: "The list says: buy milk.", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
			var tools []string
			for _, m := range req.Messages {
				if m.Role == "tool" {
					tools = append(tools, m.Content)
				}
			}
			if len(tools) != 2 || !strings.Contains(tools[0], "buy milk") || !strings.Contains(tools[1], "APPROVAL_REQUIRED") {
				t.Errorf("tool results %q", tools)
			}
		}},
	)
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("WARDEN_MODEL", "scripted")
	code, out, errs := runWS(t, home, ws, "--grant", "exec:git", "run", "what is on my list? token "+secret)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if out != "Let me look.\nThe list says: buy milk.\n" {
		t.Errorf("stdout %q", out)
	}
	for _, want := range []string{"→ fs_read", "✓ ok", "→ shell", "✗ APPROVAL_REQUIRED", " succeeded after 2 step(s), 2 tool call(s)"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	id := regexp.MustCompile(`run (\w+) on scripted`).FindStringSubmatch(errs)
	if id == nil {
		t.Fatalf("no run id in %s", errs)
	}
	runID := id[1]

	code, out, _ = runWS(t, home, ws, "runs", "ls")
	if code != 0 || !strings.Contains(out, runID) || !strings.Contains(out, "succeeded") {
		t.Fatalf("runs ls: %s", out)
	}
	// runs show and audit ls --run agree on the calls and their records.
	_, show, _ := runWS(t, home, ws, "runs", "show", runID)
	_, audit, _ := runWS(t, home, ws, "audit", "ls", "--run", runID, "--json")
	var recs []struct {
		Seq   uint64 `json:"seq"`
		Event struct {
			Phase   string `json:"phase"`
			Tool    string `json:"tool"`
			Outcome string `json:"outcome"`
		} `json:"event"`
	}
	if err := json.Unmarshal([]byte(audit), &recs); err != nil {
		t.Fatalf("audit ls --json: %v\n%s", err, audit)
	}
	results := map[string]string{}
	for _, r := range recs {
		if r.Event.Phase == "result" {
			results[r.Event.Tool] = r.Event.Outcome
			row := regexp.MustCompile(`(?m)^\d+\s+` + regexp.QuoteMeta(itoa(r.Seq)) + `\s+` + r.Event.Tool + `\s`)
			if !row.MatchString(show) {
				t.Errorf("runs show has no %s call with audit record %d:\n%s", r.Event.Tool, r.Seq, show)
			}
		}
	}
	if results["fs_read"] != "ok" || results["shell"] != "APPROVAL_REQUIRED" || len(results) != 2 {
		t.Fatalf("audit results %v\n%s", results, audit)
	}

	dir := t.TempDir()
	if code, _, e := runWS(t, home, ws, "runs", "export", runID, "--dir", dir); code != 0 {
		t.Fatalf("export: %s", e)
	}
	base := filepath.Join(dir, runID)
	for _, f := range []string{"run.json", "transcript.jsonl", "final.md", "audit.jsonl", "tool-outputs/001-fs_read.json", "tool-outputs/002-shell.json"} {
		b, err := os.ReadFile(filepath.Join(base, f))
		if err != nil || len(b) == 0 {
			t.Errorf("export %s: %v", f, err)
		}
	}
	final, _ := os.ReadFile(filepath.Join(base, "final.md"))
	transcript, _ := os.ReadFile(filepath.Join(base, "transcript.jsonl"))
	if string(final) != "The list says: buy milk.\n" || bytes.Count(transcript, []byte("\n")) != 6 {
		t.Errorf("final %q, transcript %d lines", final, bytes.Count(transcript, []byte("\n")))
	}
	filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
				t.Errorf("the secret reached %s", p)
			}
		}
		return nil
	})
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
				t.Errorf("the secret reached %s", p)
			}
		}
		return nil
	})

	// A symlink planted where the export goes does not send it elsewhere.
	elsewhere, planted := t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(planted, runID)); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runWS(t, home, ws, "runs", "export", runID, "--dir", planted); code == 0 {
		t.Error("export through a planted symlink succeeded")
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("export wrote through the symlink: %v", ents)
	}

	// Replayed offline through today's gate: the same outcomes.
	code, out, errs = runWS(t, home, ws, "--grant", "exec:git", "runs", "replay", runID)
	if code != 0 || !strings.Contains(out, "0 difference(s)") {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errs)
	}
	// A policy that grants nothing: the replay says which calls now
	// differ (the read is refused, the shell is refused before it could
	// even ask for approval), and exits 1.
	policy := filepath.Join(t.TempDir(), "strict.yaml")
	if err := os.WriteFile(policy, []byte("version: 1\ngrants: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runWS(t, home, ws, "--policy", policy, "runs", "replay", runID)
	if code != 1 || !strings.Contains(out, "2 difference(s)") || !strings.Contains(out, "fs_read): recorded ok, now CAPABILITY_DENIED") ||
		!strings.Contains(out, "shell): recorded APPROVAL_REQUIRED, now CAPABILITY_DENIED") {
		t.Fatalf("replay after the policy change: exit %d\n%s", code, out)
	}
	if code, _, e := runWS(t, home, ws, "audit", "verify"); code != 0 {
		t.Fatalf("audit verify: %s", e)
	}
}

// TestRunNeedsAModel: with no endpoint configured, a clear usage error.
func TestRunNeedsAModel(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	code, _, errs := runWS(t, t.TempDir(), t.TempDir(), "run", "hello")
	if code != env.ExitUsage || !strings.Contains(errs, "LLM_ERROR: no model is configured") || !strings.Contains(errs, "OPENAI_BASE_URL") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

// TestRunFailsWithLLMError: repeated 500s end the run with LLM_ERROR (exit
// 1), and the failed run is on record.
func TestRunFailsWithLLMError(t *testing.T) {
	home, ws := t.TempDir(), t.TempDir()
	steps := make([]llmtest.Step, 5)
	for i := range steps {
		steps[i] = llmtest.Step{Status: 500, RetryAfter: "0"}
	}
	srv := llmtest.New(t, steps...)
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("WARDEN_MODEL", "scripted")
	code, _, errs := runWS(t, home, ws, "run", "hello")
	if code != env.ExitFailed || !strings.Contains(errs, "LLM_ERROR: the model endpoint failed 5 times") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	_, out, _ := runWS(t, home, ws, "runs", "ls")
	if !strings.Contains(out, "failed") {
		t.Fatalf("runs ls: %s", out)
	}
}

// TestRunToolsFlagTakesCommaSeparatedNames: --tools is repeatable and
// comma-separated (it splits its names itself: no repeatable flag's value
// is split on commas by the flag parser).
func TestRunToolsFlagTakesCommaSeparatedNames(t *testing.T) {
	srv := llmtest.New(t, llmtest.Step{Content: "done.", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
		var names []string
		for _, tl := range req.Tools {
			names = append(names, tl.Function.Name)
		}
		if slices.Sort(names); strings.Join(names, ",") != "fs_list,fs_read,system" {
			t.Errorf("offered tools %v", names)
		}
	}})
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("WARDEN_MODEL", "scripted")
	if code, out, errs := runWS(t, t.TempDir(), t.TempDir(), "run", "--tools", "fs_read,fs_list", "--tools", "system", "hello"); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
}

func itoa(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
