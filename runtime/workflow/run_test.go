package workflow_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	fstools "github.com/wardenrt/warden/builtin/fs"
	"github.com/wardenrt/warden/builtin/text"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/workflow"
)

// env is a workspace with a gate over the fs and text tools.
type env struct {
	t     *testing.T
	ws    string
	audit *runtimetest.Audit
	runs  *runtimetest.Runs
	gate  *gate.Gate
}

func newEnv(t *testing.T, grants string) *env {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg := gate.NewRegistry()
	if err := reg.Register(append(fstools.Tools(), text.Tools(text.Config{})...)...); err != nil {
		t.Fatal(err)
	}
	p, err := policy.ParsePolicy("test", []byte("version: 1\ngrants: ["+grants+"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ws: ws, audit: &runtimetest.Audit{}, runs: &runtimetest.Runs{}}
	e.gate, err = gate.NewGate(gate.GateOptions{Registry: reg, Policy: p, Workspace: ws, Audit: e.audit})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) write(name, content string) {
	e.t.Helper()
	runtimetest.WriteFile(e.t, e.ws, name, content)
}

// options check tools against the registry and open nested files in the
// workspace.
func (e *env) options() workflow.Options {
	return workflow.Options{
		Tool: func(name string) (func(map[string]any) error, bool) {
			return nil, e.gate.Registry().Has(name)
		},
		Open: func(from, p string) (string, []byte, error) {
			src := filepath.Join(filepath.Dir(from), p)
			b, err := os.ReadFile(src)
			return src, b, err
		},
	}
}

func (e *env) parse(name, src string) *workflow.Workflow {
	e.t.Helper()
	e.write(name, src)
	w, err := workflow.Parse(filepath.Join(e.ws, name), []byte(src), e.options())
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

func (e *env) run(w *workflow.Workflow, o workflow.RunOptions) *workflow.Record {
	e.t.Helper()
	o.Gate, o.Runs, o.Check = e.gate, e.runs, e.options()
	o.Open = o.Check.Open
	rec, err := workflow.Run(context.Background(), w, o)
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// tree is a checksum of every file under the workspace.
func (e *env) tree() string {
	h := sha256.New()
	filepath.WalkDir(e.ws, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			fmt.Fprintf(h, "%s %x\n", p, sha256.Sum256(b))
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}

const report = `version: 1
name: report
params:
  pattern: {type: string, default: "src/*.txt"}
grants: ["fs.read:**", "fs.write:out/**"]
steps:
  - id: files
    tool: fs_glob
    args: {pattern: "${{ params.pattern }}"}
  - id: read
    tool: fs_read
    foreach: ${{ steps.files.data.matches }}
    args: {path: "${{ item }}"}
  - id: skipped
    tool: fs_write
    when: ${{ steps.read.failed }}
    args: {path: "out/never.md", content: "x"}
  - id: write
    tool: fs_write
    args: {path: "out/report.md", content: "files: ${{ steps.files.data.matches }}"}
outputs:
  written: "${{ steps.write.success }}"
`

func TestRunReport(t *testing.T) {
	e := newEnv(t, `"fs.read:**", "fs.write:**"`)
	e.write("src/a.txt", "alpha")
	e.write("src/b.txt", "beta")
	w := e.parse("report.yaml", report)
	rec := e.run(w, workflow.RunOptions{})
	if rec.Status != workflow.StatusSucceeded {
		t.Fatalf("%s %+v", rec.Status, rec.Error)
	}
	st := map[string]string{}
	for _, r := range rec.Results {
		st[r.ID] = r.Status
	}
	if st["files"] != "succeeded" || st["read"] != "succeeded" || st["skipped"] != "skipped" || st["write"] != "succeeded" {
		t.Fatalf("steps %v", st)
	}
	if rec.Results[1].Items != 2 || !strings.Contains(rec.Results[1].Output, "alpha") || !strings.Contains(rec.Results[1].Output, "beta") {
		t.Errorf("foreach %+v", rec.Results[1])
	}
	b, _ := os.ReadFile(filepath.Join(e.ws, "out/report.md"))
	if string(b) != `files: ["src/a.txt","src/b.txt"]` {
		t.Errorf("report %q", b)
	}
	if rec.Outputs["written"] != true {
		t.Errorf("outputs %v", rec.Outputs)
	}
	// Every call is audited as the workflow's, with the run's id.
	for _, ev := range e.audit.Results("") {
		if strings.Join(ev.Principal, ">") != "cli>workflow:report" || ev.RunID != rec.ID {
			t.Fatalf("audit %+v", ev)
		}
	}
	// The workflow acts with policy ∩ requested: fs.write:** is narrowed
	// to out/**.
	if strings.Join(rec.Grants, " ") != "fs.read:** fs.write:out/**" {
		t.Errorf("grants %v", rec.Grants)
	}
	doc, ok := e.runs.Run(rec.ID)
	if !ok || !strings.Contains(string(doc), `"kind":"workflow"`) {
		t.Fatalf("record %s", doc)
	}
}

// TestDryRunChangesNothing: every step previewed, the tree unchanged.
func TestDryRunChangesNothing(t *testing.T) {
	e := newEnv(t, `"fs.read:**", "fs.write:**"`)
	e.write("src/a.txt", "alpha")
	w := e.parse("report.yaml", report)
	before := e.tree()
	rec := e.run(w, workflow.RunOptions{DryRun: true})
	if rec.Status != workflow.StatusSucceeded || !rec.Results[3].DryRun {
		t.Fatalf("%s %+v %+v", rec.Status, rec.Error, rec.Results)
	}
	if after := e.tree(); after != before {
		t.Fatal("a dry run changed the workspace")
	}
}

// TestMissingGrantsFailBeforeStepOne.
func TestMissingGrantsFailBeforeStepOne(t *testing.T) {
	e := newEnv(t, `"fs.read:**"`)
	w := e.parse("report.yaml", report)
	rec := e.run(w, workflow.RunOptions{})
	if rec.Status != workflow.StatusFailed || rec.Error.Code != tool.CodeCapabilityDenied || !strings.Contains(rec.Error.Message, "fs.write:out/**") ||
		rec.Error.Hint != "needs the grant fs.write:out/**" || !slices.Equal(rec.Error.Missing, []string{"fs.write:out/**"}) {
		t.Fatalf("%+v", rec.Error)
	}
	if len(rec.Results) != 0 || len(e.audit.Events()) != 0 {
		t.Fatalf("a step ran: %+v", rec.Results)
	}
}

// TestDeadlineFails: a run whose context reached its deadline (a scheduled
// job's timeout) failed, TIMEOUT; one whose context was cancelled is
// cancelled. Both can be resumed.
func TestDeadlineFails(t *testing.T) {
	e := newEnv(t, `"fs.read:**", "fs.write:out/**"`)
	w := e.parse("report.yaml", report)
	run := func(ctx context.Context) *workflow.Record {
		t.Helper()
		o := workflow.RunOptions{Gate: e.gate, Runs: e.runs, Check: e.options()}
		o.Open = o.Check.Open
		rec, err := workflow.Run(ctx, w, o)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if rec := run(ctx); rec.Status != workflow.StatusFailed || rec.Error == nil || rec.Error.Code != tool.CodeTimeout ||
		!strings.Contains(rec.Error.Hint, "warden workflow resume "+rec.ID) {
		t.Errorf("past its deadline: %s %+v", rec.Status, rec.Error)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if rec := run(ctx); rec.Status != workflow.StatusCancelled || rec.Error == nil || rec.Error.Code != tool.CodeUserCancelled {
		t.Errorf("cancelled: %s %+v", rec.Status, rec.Error)
	}
}

// TestResumeAfterFailure: a step fails; once the cause is fixed, resume
// continues from it without running the steps before again.
func TestResumeAfterFailure(t *testing.T) {
	e := newEnv(t, `"fs.read:**", "fs.write:**"`)
	src := `version: 1
name: two
grants: ["fs.read:**", "fs.write:out/**"]
steps:
  - {id: first, tool: fs_write, args: {path: out/one.md, content: "1"}}
  - {id: second, tool: fs_read, args: {path: later.txt}}
  - {id: third, tool: fs_write, args: {path: out/three.md, content: "${{ steps.second.output }}"}}
`
	w := e.parse("two.yaml", src)
	rec := e.run(w, workflow.RunOptions{})
	if rec.Status != workflow.StatusFailed || rec.Error.Code != tool.CodeNotFound || !strings.Contains(rec.Error.Hint, "workflow resume "+rec.ID) {
		t.Fatalf("%s %+v", rec.Status, rec.Error)
	}
	calls := len(e.audit.Results(""))
	e.write("later.txt", "three")
	saved, _ := e.runs.Run(rec.ID)
	var prev workflow.Record
	if err := json.Unmarshal(saved, &prev); err != nil {
		t.Fatal(err)
	}
	again := e.run(w, workflow.RunOptions{Resume: &prev})
	if again.Status != workflow.StatusSucceeded || again.ID != rec.ID || again.Resumed != 1 || len(again.Results) != 3 {
		t.Fatalf("%s %+v %+v", again.Status, again.Error, again.Results)
	}
	if n := len(e.audit.Results("")) - calls; n != 2 {
		t.Errorf("the resume made %d calls, want 2 (first not run again)", n)
	}
	if b, _ := os.ReadFile(filepath.Join(e.ws, "out/three.md")); string(b) != "three" {
		t.Errorf("three %q", b)
	}
}

// TestNestedAtDepthLimit: workflows nest to the limit and no further.
func TestNestedAtDepthLimit(t *testing.T) {
	e := newEnv(t, `"fs.read:**"`)
	leaf := "version: 1\nname: leaf\nparams:\n  text: {type: string, required: true}\nsteps:\n  - {id: a, tool: analyze, args: {text: \"${{ params.text }}\"}}\noutputs:\n  words: \"${{ steps.a.data.words }}\"\n"
	e.write("w3.yaml", leaf)
	e.write("w2.yaml", "version: 1\nname: w2\nsteps:\n  - {id: down, workflow: w3.yaml, params: {text: one two three}}\noutputs:\n  words: \"${{ steps.down.data.words }}\"\n")
	top := e.parse("w1.yaml", "version: 1\nname: w1\nsteps:\n  - {id: down, workflow: w2.yaml}\noutputs:\n  words: \"${{ steps.down.data.words }}\"\n")
	o := e.options()
	o.MaxDepth = 3
	if _, err := workflow.Parse(filepath.Join(e.ws, "w1.yaml"), []byte("version: 1\nname: w1\nsteps:\n  - {id: down, workflow: w2.yaml}\n"), o); err != nil {
		t.Fatalf("three deep with a limit of 3: %v", err)
	}
	rec := e.run(top, workflow.RunOptions{})
	if rec.Status != workflow.StatusSucceeded || fmt.Sprint(rec.Outputs["words"]) != "3" {
		t.Fatalf("%s %+v %v", rec.Status, rec.Error, rec.Outputs)
	}
	// The same limit holds when running: a run checking with a limit of 2
	// refuses the third level.
	e.write("w1.yaml", "version: 1\nname: w1\nsteps:\n  - {id: down, workflow: w2.yaml}\n")
	ro := workflow.RunOptions{Gate: e.gate, Check: e.options()}
	ro.Check.MaxDepth, ro.Open = 2, ro.Check.Open
	shallow := *top
	shallow.Outputs = nil
	deep, err := workflow.Run(context.Background(), &shallow, ro)
	if err != nil || deep.Status != workflow.StatusFailed || !strings.Contains(deep.Error.Message, "nest at most 2 deep") {
		t.Fatalf("running past the limit: %v %+v", err, deep.Error)
	}
	o.MaxDepth = 2
	_, err = workflow.Parse(filepath.Join(e.ws, "w1.yaml"), []byte("version: 1\nname: w1\nsteps:\n  - {id: down, workflow: w2.yaml}\n"), o)
	if err == nil || !strings.Contains(err.Error(), "nest at most 2 deep") {
		t.Fatalf("past the limit: %v", err)
	}
}

// TestForeachAtItsBound: 256 items run; a reference to 257 fails the step.
func TestForeachAtItsBound(t *testing.T) {
	e := newEnv(t, `"fs.read:**"`)
	items := make([]string, workflow.MaxForeach)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	w := e.parse("many.yaml", "version: 1\nname: many\nsteps:\n  - id: each\n    tool: analyze\n    foreach: ["+strings.Join(items, ", ")+"]\n    args: {text: \"item ${{ item }}\"}\n")
	rec := e.run(w, workflow.RunOptions{})
	if rec.Status != workflow.StatusSucceeded || rec.Results[0].Items != workflow.MaxForeach || len(rec.Results[0].CallIDs) != workflow.MaxForeach {
		t.Fatalf("%s %+v", rec.Status, rec.Error)
	}
	too := make([]string, workflow.MaxForeach+1)
	for i := range too {
		too[i] = "\"f\""
	}
	w = e.parse("over.yaml", "version: 1\nname: over\nparams:\n  list: {type: array}\nsteps:\n  - id: each\n    tool: analyze\n    foreach: ${{ params.list }}\n    args: {text: \"${{ item }}\"}\n")
	rec = e.run(w, workflow.RunOptions{Params: map[string]any{"list": "[" + strings.Join(too, ",") + "]"}})
	if rec.Status != workflow.StatusFailed || rec.Error.Code != tool.CodeTooLarge {
		t.Fatalf("%s %+v", rec.Status, rec.Error)
	}
}

// TestRetryContinueAndAgent: a failing step is retried, continue_on_error
// lets the run go on, and an agent step without a model says it needs one.
func TestRetryContinueAndAgent(t *testing.T) {
	e := newEnv(t, `"fs.read:**"`)
	w := e.parse("r.yaml", `version: 1
name: r
steps:
  - {id: flaky, tool: fs_read, args: {path: missing.txt}, retry: {attempts: 2, delay: 1ms}, continue_on_error: true}
  - {id: denied, tool: fs_write, args: {path: x.md, content: x}, retry: {attempts: 3}, continue_on_error: true}
  - {id: think, agent: "summarise ${{ steps.flaky.output }}"}
`)
	rec := e.run(w, workflow.RunOptions{})
	if rec.Results[0].Status != "failed" || rec.Results[0].Attempts != 3 {
		t.Errorf("flaky %+v", rec.Results[0])
	}
	if rec.Results[1].Attempts != 1 || rec.Results[1].Error.Code != tool.CodeCapabilityDenied {
		t.Errorf("a denial was retried: %+v", rec.Results[1])
	}
	if rec.Status != workflow.StatusFailed || rec.Error.Code != tool.CodeLLMError || !strings.Contains(rec.Error.Message, "no model is configured") {
		t.Fatalf("%s %+v", rec.Status, rec.Error)
	}
}

// TestParams: -p strings are converted to the declared type; unknown and
// missing required params are refused.
func TestParams(t *testing.T) {
	e := newEnv(t, `"fs.read:**"`)
	w := e.parse("p.yaml", "version: 1\nname: p\nparams:\n  n: {type: integer, required: true}\nsteps:\n  - {id: a, tool: analyze, args: {text: \"n=${{ params.n }}\"}}\n")
	for given, want := range map[string]string{"": "needs param n", "x": "is not a integer", "1.5": "not of type integer"} {
		p := map[string]any{}
		if given != "" {
			p["n"] = given
		}
		rec := e.run(w, workflow.RunOptions{Params: p})
		if rec.Status != workflow.StatusFailed || !strings.Contains(rec.Error.Message, want) {
			t.Errorf("-p n=%s: %+v", given, rec.Error)
		}
	}
	rec := e.run(w, workflow.RunOptions{Params: map[string]any{"n": "4", "m": "1"}})
	if rec.Status != workflow.StatusFailed || !strings.Contains(rec.Error.Message, "no param m") {
		t.Errorf("unknown param: %+v", rec.Error)
	}
	rec = e.run(w, workflow.RunOptions{Params: map[string]any{"n": "4"}})
	if rec.Status != workflow.StatusSucceeded || rec.Params["n"] != 4.0 {
		t.Errorf("n=4: %+v %v", rec.Error, rec.Params)
	}
}

// TestMaskRoundTrip: a step's output carries masks, not secrets; written
// back into the file it was read from by a later step (same run, same
// vault) the secrets are restored, and sent to another file the step is
// refused. The record holds no secret.
func TestMaskRoundTrip(t *testing.T) {
	const token = "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"
	env := "DEBUG=false\nGITHUB_TOKEN=" + token + "\n"
	e := newEnv(t, `"fs.read:**", "fs.write:**"`)
	e.write(".env", env)
	w := e.parse("copy.yaml", `version: 1
name: copy
steps:
  - id: read
    tool: fs_read
    args: {path: .env}
  - id: back
    tool: fs_write
    args: {path: .env, content: "${{ steps.read.output }}"}
  - id: elsewhere
    tool: fs_write
    args: {path: public.txt, content: "${{ steps.read.output }}"}
`)
	rec := e.run(w, workflow.RunOptions{})
	if len(rec.Results) != 3 || rec.Results[1].Status != workflow.StepSucceeded || rec.Results[2].Error == nil ||
		rec.Results[2].Error.Code != tool.CodeInvalidInput {
		t.Fatalf("results %+v", rec.Results)
	}
	if !strings.Contains(rec.Results[0].Output, "[REDACTED:github-token:") || len(rec.Results[0].Warnings) == 0 {
		t.Errorf("read: %q %q", rec.Results[0].Output, rec.Results[0].Warnings)
	}
	if b, _ := os.ReadFile(filepath.Join(e.ws, ".env")); string(b) != env {
		t.Errorf(".env %q", b)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "public.txt")); err == nil {
		t.Error("public.txt was written")
	}
	doc, _ := e.runs.Run(rec.ID)
	audit, _ := json.Marshal(e.audit.Events())
	if strings.Contains(string(doc), token) || strings.Contains(string(audit), token) {
		t.Error("the secret reached the record or the audit log")
	}
}

// TestNestedParsedOncePerRun: a nested step run by a foreach parses its
// child once for the whole run, not once per item (each parse of a child
// may cost up to the whole token budget).
func TestNestedParsedOncePerRun(t *testing.T) {
	e := newEnv(t, `"fs.read:**"`)
	e.write("leaf.yaml", "version: 1\nname: leaf\nparams:\n  text: {type: string, required: true}\nsteps:\n  - {id: a, tool: analyze, args: {text: \"${{ params.text }}\"}}\n")
	var items []string
	for i := 0; i < 20; i++ {
		items = append(items, fmt.Sprintf("i%d", i))
	}
	top := e.parse("top.yaml", "version: 1\nname: top\nsteps:\n  - id: each\n    workflow: leaf.yaml\n    foreach: ["+strings.Join(items, ", ")+"]\n    params: {text: \"${{ item }}\"}\n")
	o := workflow.RunOptions{Gate: e.gate, Runs: e.runs, Check: e.options()}
	checks := 0
	tool := o.Check.Tool
	o.Check.Tool = func(name string) (func(map[string]any) error, bool) {
		checks++ // once per tool step of every parse
		return tool(name)
	}
	o.Open = o.Check.Open
	rec, err := workflow.Run(context.Background(), top, o)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != workflow.StatusSucceeded {
		t.Fatalf("%s %+v", rec.Status, rec.Error)
	}
	if checks != 1 {
		t.Fatalf("the child was checked %d times in a run of 20 items, want once", checks)
	}
}
