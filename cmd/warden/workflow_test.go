package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/internal/llmtest"
	"github.com/wardenrt/warden/internal/wasmfixture"
)

// exampleWorkspace is a git repository holding a README and the example
// workflows (and their config file), as in this checkout.
func exampleWorkspace(t *testing.T) string {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	copyFile := func(rel string) {
		b, err := os.ReadFile(filepath.Join("..", "..", rel))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"README.md", "examples/workflows/repo-report.yaml", "examples/workflows/config-audit.yaml",
		"examples/workflows/summarize.yaml", "examples/workflows/config/app.conf", "go.mod"} {
		copyFile(f)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"commit", "-q", "-m", "init"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return ws
}

// treeSum is a checksum of every file under dir but .git.
func treeSum(t *testing.T, dir string) string {
	h := sha256.New()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			b, _ := os.ReadFile(p)
			fmt.Fprintf(h, "%s %x\n", p, sha256.Sum256(b))
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}

// TestExampleWorkflows runs each example workflow from the CLI: the
// repository report with the textstats wasm tool installed, the config
// audit as a dry run that changes nothing, and the agent one without a
// model (it says it needs one) and against the scripted model server.
func TestExampleWorkflows(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a wasm guest; skipped with -short")
	}
	home, ws := t.TempDir(), exampleWorkspace(t)
	t.Setenv("OPENAI_BASE_URL", "")
	t.Setenv("OPENAI_API_KEY", "")
	if code, _, e := runWS(t, home, ws, "tool", "install", wasmfixture.Stage(t, "examples/textstats", "", false)); code != 0 {
		t.Fatalf("install textstats: %s", e)
	}

	// The repository report.
	code, out, errs := runWS(t, home, ws, "--grant", "fs.write:reports/**", "--grant", "memory.write:reports", "workflow", "run", filepath.Join(ws, "examples/workflows/repo-report.yaml"))
	if code != 0 {
		t.Fatalf("repo-report: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"✓ [4/7] stats succeeded", "✗ [5/7] tamper failed", "CAPABILITY_DENIED", "✓ [7/7] remember succeeded"} {
		if !strings.Contains(errs, want) {
			t.Errorf("repo-report progress lacks %q:\n%s", want, errs)
		}
	}
	report, err := os.ReadFile(filepath.Join(ws, "reports/repo-report.md"))
	if err != nil || !strings.Contains(string(report), `"words":`) || !strings.Contains(string(report), "## main") {
		t.Fatalf("report: %v\n%s", err, report)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "README.md")); strings.Contains(string(b), "pwned") {
		t.Fatal("the refused step wrote the README")
	}
	if _, out, _ := runWS(t, home, ws, "memory", "get", "--ns", "reports", "repo-report"); !strings.Contains(out, "files matching") {
		t.Errorf("memory: %q", out)
	}
	if _, out, _ := runWS(t, home, ws, "audit", "ls", "--tool", "textstats"); !strings.Contains(out, "cli>workflow:repo-report") {
		t.Errorf("the wasm tool's call is not on record as the workflow's:\n%s", out)
	}

	// The config audit: a dry run of everything changes nothing.
	before := treeSum(t, ws)
	code, out, errs = runWS(t, home, ws, "--dry-run", "--grant", "fs.write:examples/workflows/config/**", "workflow", "run", filepath.Join(ws, "examples/workflows/config-audit.yaml"))
	if code != 0 || !strings.Contains(out, "-debug = true") || !strings.Contains(out, "+debug = false") {
		t.Fatalf("config-audit: exit %d\n%s\n%s", code, out, errs)
	}
	if treeSum(t, ws) != before {
		t.Fatal("the dry run changed the workspace")
	}

	// The agent step, with no model: a clear failure.
	code, _, errs = runWS(t, home, ws, "workflow", "run", filepath.Join(ws, "examples/workflows/summarize.yaml"))
	if code != env.ExitFailed || !strings.Contains(errs, "LLM_ERROR: step summary failed: step summary is a task for a model, and no model is configured") {
		t.Fatalf("summarize without a model: exit %d\n%s", code, errs)
	}
	// And against the scripted model, under the workflow's grants only.
	srv := llmtest.New(t, llmtest.Step{Content: "warden gates every tool call.", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
		sys := req.Messages[0].Content
		if !strings.Contains(sys, "fs.read:**") || strings.Contains(sys, "git.read") {
			t.Errorf("the agent step was not limited to the workflow's grants:\n%s", sys)
		}
		if !strings.Contains(req.Messages[1].Content, "Summarise README.md") {
			t.Errorf("task %q", req.Messages[1].Content)
		}
	}})
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("WARDEN_MODEL", "scripted")
	code, out, errs = runWS(t, home, ws, "workflow", "run", filepath.Join(ws, "examples/workflows/summarize.yaml"))
	if code != 0 || !strings.Contains(out, "summary: warden gates every tool call.") {
		t.Fatalf("summarize: exit %d\n%s\n%s", code, out, errs)
	}
	if code, _, e := runWS(t, home, ws, "audit", "verify"); code != 0 {
		t.Fatalf("audit verify: %s", e)
	}
}
