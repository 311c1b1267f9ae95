package builtin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenrt/warden/builtin/automation"
	"github.com/wardenrt/warden/builtin/fs"
	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/builtin/text"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/workflow"
)

func workflowGate(t *testing.T, grants string) (*gate.Gate, string, *runtimetest.Runs) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	runs := &runtimetest.Runs{}
	tools := append(fs.Tools(), automation.Tools(automation.Config{Runs: runs})...)
	tools = append(tools, text.Tools(text.Config{})...)
	g, _ := tooltest.Gate(t, "version: 1\ngrants: ["+grants+"]\n", ws, tools...)
	return g, ws, runs
}

const toolWorkflow = `version: 1
name: notes
grants: ["fs.read:**", "fs.write:out/**"]
steps:
  - {id: count, tool: analyze, args: {text: "${{ params.text }}"}}
  - {id: write, tool: fs_write, args: {path: out/words.md, content: "${{ steps.count.data.words }} words"}}
params:
  text: {type: string, required: true}
outputs:
  words: "${{ steps.count.data.words }}"
`

// TestWorkflowTools: a model validates and runs a workflow through the
// gate: the run acts within the calling call's grants ∩ the workflow's,
// its steps are the caller's calls, and it is recorded.
func TestWorkflowTools(t *testing.T) {
	g, ws, runs := workflowGate(t, `"fs.read:**", "fs.write:**"`)
	runtimetest.WriteFile(t, ws, "w.yaml", toolWorkflow)
	runtimetest.WriteFile(t, ws, "bad.yaml", "version: 1\nname: bad\nsteps:\n  - {id: a, tool: nope}\n")

	res := tooltest.Call(t, g, "workflow_validate", `{"path":"bad.yaml"}`)
	var vd automation.WorkflowValidateData
	if err := json.Unmarshal(res.Data, &vd); err != nil || !res.Success || vd.Valid || len(vd.Problems) != 1 || vd.Problems[0].Line != 4 || vd.Problems[0].Column != 19 {
		t.Fatalf("validate bad: %+v %s", res.Error, res.Data)
	}
	res = tooltest.Call(t, g, "workflow_validate", `{"path":"w.yaml"}`)
	if err := json.Unmarshal(res.Data, &vd); err != nil || !vd.Valid || vd.Steps != 2 {
		t.Fatalf("validate: %+v %s", res.Error, res.Data)
	}

	// A dry run (the preview) changes nothing.
	res = tooltest.CallReq(t, g, gate.Request{Tool: "workflow_run", Args: json.RawMessage(`{"path":"w.yaml","params":{"text":"one two three"}}`), Principal: []string{"cli", "model"}, DryRun: true})
	if !res.Success {
		t.Fatalf("dry run: %+v\n%s", res.Error, res.Output)
	}
	if _, err := os.Stat(filepath.Join(ws, "out/words.md")); err == nil {
		t.Fatal("the preview wrote a file")
	}
	res = tooltest.CallReq(t, g, gate.Request{Tool: "workflow_run", Args: json.RawMessage(`{"path":"w.yaml","params":{"text":"one two three"}}`), Principal: []string{"cli", "model"}})
	if !res.Success || !strings.Contains(res.Output, `output words: 3`) {
		t.Fatalf("run: %+v\n%s", res.Error, res.Output)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out/words.md")); string(b) != "3 words" {
		t.Errorf("words.md %q", b)
	}
	var rec workflow.Record
	if err := json.Unmarshal(res.Data, &rec); err != nil {
		t.Fatal(err)
	}
	if doc, ok := runs.Run(rec.ID); !ok || !strings.Contains(string(doc), `"principal":["cli","model"]`) {
		t.Fatalf("record %s", doc)
	}
}

// TestWorkflowRunWithinCallersGrants: a workflow asking for more than the
// caller has fails before its first step; workflow_run cannot be called
// from a workflow.
func TestWorkflowRunWithinCallersGrants(t *testing.T) {
	g, ws, _ := workflowGate(t, `"fs.read:**"`)
	runtimetest.WriteFile(t, ws, "w.yaml", toolWorkflow)
	res := tooltest.Call(t, g, "workflow_run", `{"path":"w.yaml","params":{"text":"x"}}`)
	if res.Success || res.Error.Code != tool.CodeCapabilityDenied || !strings.Contains(res.Error.Message, "fs.write:out/**") {
		t.Fatalf("%+v", res.Error)
	}
	runtimetest.WriteFile(t, ws, "loop.yaml", "version: 1\nname: loop\nsteps:\n  - {id: again, tool: workflow_run, args: {path: loop.yaml}}\n")
	res = tooltest.Call(t, g, "workflow_run", `{"path":"loop.yaml"}`)
	if res.Success || res.Error.Code != tool.CodeOperationNotSupported || !strings.Contains(res.Error.Message, "step again failed: workflow_run cannot be called from a workflow") {
		t.Fatalf("%+v", res.Error)
	}
	// Reading the workflow file needs fs.read of it.
	g2, ws2, _ := workflowGate(t, `"fs.read:docs/**"`)
	runtimetest.WriteFile(t, ws2, "w.yaml", toolWorkflow)
	if res := tooltest.Call(t, g2, "workflow_run", `{"path":"w.yaml"}`); res.Error == nil || res.Error.Code != tool.CodeCapabilityDenied {
		t.Fatalf("%+v", res.Error)
	}
}
