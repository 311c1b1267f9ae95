package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/wardenrt/warden/internal/thirdparty/jsonschema"
	"github.com/wardenrt/warden/runtime/gate"
)

// testOptions knows two tools (fs_read needs a string path) and a few
// nested workflow files.
func testOptions(files map[string]string) Options {
	return Options{
		Tool: func(name string) (func(map[string]any) error, bool) {
			switch name {
			case "fs_read":
				return func(a map[string]any) error {
					if _, ok := a["path"].(string); !ok {
						return errors.New("path: a string is required")
					}
					return nil
				}, true
			case "fs_glob", "git_status":
				return nil, true
			}
			return nil, false
		},
		Open: func(from, p string) (string, []byte, error) {
			src := path.Join(path.Dir(from), p)
			data, ok := files[src]
			if !ok {
				return "", nil, fmt.Errorf("%s: no such file", src)
			}
			return src, []byte(data), nil
		},
	}
}

const validWorkflow = `version: 1
name: report
description: a small report
params:
  pattern: {type: string, default: "**/*.go"}
  limit: {type: integer, default: 3}
grants: ["fs.read:**"]
steps:
  - id: files
    tool: fs_glob
    args: {pattern: "${{ params.pattern }}"}
  - id: first
    tool: fs_read
    when: ${{ steps.files.success && params.limit != 0 }}
    foreach: ${{ steps.files.data.matches }}
    args: {path: "${{ item }}"}
    retry: {attempts: 2, delay: 10ms}
    timeout: 5s
    continue_on_error: true
  - id: sub
    workflow: sub.yaml
    params: {target: "out/${{ steps.files.output }}"}
outputs:
  count: "${{ steps.files.data.count }}"
`

const subWorkflow = `version: 1
name: sub
params:
  target: {type: string, required: true}
steps:
  - id: s
    tool: git_status
`

func TestValidWorkflow(t *testing.T) {
	w, err := Parse("dir/report.yaml", []byte(validWorkflow), testOptions(map[string]string{"dir/sub.yaml": subWorkflow}))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Steps) != 3 || w.Steps[1].Retry.Attempts != 2 || w.Steps[2].Kind() != "workflow" {
		t.Fatalf("%+v", w)
	}
	// The published JSON Schema accepts it too.
	var doc any
	if err := yaml.Unmarshal([]byte(validWorkflow), &doc); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(doc)
	inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	sch := compileSchema(t)
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("schema: %v", err)
	}
}

func compileSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	s, err := jsonschema.UnmarshalJSON(strings.NewReader(string(Schema())))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("workflow.json", s); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("workflow.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// TestValidationErrors: each kind of error is reported with the line and
// column of the value at fault.
func TestValidationErrors(t *testing.T) {
	head := "version: 1\nname: w\n"
	tests := []struct {
		name      string
		yaml      string
		line, col int
		want      string
	}{
		{"yaml syntax", head + "steps:\n  - id: a\n    tool: [fs_glob\n", 5, 11, ""},
		{"unknown field", head + "steps:\n  - id: a\n    tool: fs_glob\n    argz: {}\n", 6, 5, "argz"},
		{"wrong type", head + "steps:\n  - id: a\n    tool: fs_glob\n    continue_on_error: sometimes\n", 6, 24, ""},
		{"version", "version: 2\nname: w\nsteps:\n  - {id: a, tool: fs_glob}\n", 1, 10, "version must be 1"},
		{"unknown tool", head + "steps:\n  - id: a\n    tool: rm_rf\n", 5, 11, `no tool "rm_rf"`},
		{"tool args", head + "steps:\n  - id: a\n    tool: fs_read\n    args: {path: 3}\n", 6, 12, "path: a string is required"},
		{"no kind", head + "steps:\n  - id: a\n    args: {}\n", 4, 5, "exactly one of tool, agent and workflow"},
		{"two kinds", head + "steps:\n  - id: a\n    tool: fs_glob\n    agent: do it\n", 4, 5, "exactly one of"},
		{"duplicate id", head + "steps:\n  - {id: a, tool: fs_glob}\n  - {id: a, tool: fs_glob}\n", 5, 10, "already the id of step 1"},
		{"bad id", head + "steps:\n  - {id: 1a, tool: fs_glob}\n", 4, 10, "start with a letter"},
		{"unknown param", head + "steps:\n  - id: a\n    tool: fs_glob\n    args: {pattern: \"${{ params.nope }}\"}\n", 6, 21, `no param "nope"`},
		{"bad reference", head + "steps:\n  - id: a\n    tool: fs_glob\n    args: {pattern: \"${{ env.HOME }}\"}\n", 6, 21, "starts with params, steps or item"},
		{"unclosed reference", head + "steps:\n  - id: a\n    tool: fs_glob\n    args: {pattern: \"${{ params.x\"}\n", 6, 21, "no closing"},
		{"unknown step", head + "steps:\n  - id: a\n    tool: fs_glob\n    args: {pattern: \"${{ steps.b.output }}\"}\n", 6, 21, `no step "b"`},
		{"forward reference (cycle)", head + "steps:\n  - id: a\n    tool: fs_glob\n    args: {pattern: \"${{ steps.b.output }}\"}\n  - {id: b, tool: fs_glob}\n", 6, 21, "runs later"},
		{"self reference (cycle)", head + "steps:\n  - id: a\n    tool: fs_glob\n    args: {pattern: \"${{ steps.a.output }}\"}\n", 6, 21, "its own result"},
		{"item outside foreach", head + "steps:\n  - id: a\n    tool: fs_read\n    args: {path: \"${{ item }}\"}\n", 6, 18, "only in a step with foreach"},
		{"param default type", head + "params:\n  n: {type: integer, default: many}\nsteps:\n  - {id: a, tool: fs_glob}\n", 4, 31, "not of type integer"},
		{"param type", head + "params:\n  n: {type: int}\nsteps:\n  - {id: a, tool: fs_glob}\n", 4, 13, `type "int"`},
		{"bad grant", head + "grants: [\"fs.read\"]\nsteps:\n  - {id: a, tool: fs_glob}\n", 3, 10, ""},
		{"when syntax", head + "steps:\n  - id: a\n    tool: fs_glob\n    when: ${{ params.x = 1 }}\n", 6, 11, "when"},
		{"foreach bound", head + "steps:\n  - id: a\n    tool: fs_glob\n    foreach: [" + strings.Repeat("1,", MaxForeach) + "1]\n", 6, 14, "1 to 256"},
		{"retry bound", head + "steps:\n  - id: a\n    tool: fs_glob\n    retry: {attempts: 50}\n", 6, 23, "retry attempts"},
		{"timeout", head + "steps:\n  - id: a\n    tool: fs_glob\n    timeout: soon\n", 6, 14, "timeout"},
		{"missing nested param", head + "steps:\n  - id: a\n    workflow: sub.yaml\n", 5, 15, "needs param target"},
		{"nested param type", head + "steps:\n  - id: a\n    workflow: sub.yaml\n    params: {target: 3}\n", 6, 22, "not of type string"},
		{"unknown nested param", head + "steps:\n  - id: a\n    workflow: sub.yaml\n    params: {target: x, other: 1}\n", 6, 32, "has no param other"},
		{"nested cycle", head + "steps:\n  - id: a\n    workflow: loop.yaml\n", 5, 15, "cycle"},
		{"missing file", head + "steps:\n  - id: a\n    workflow: nowhere.yaml\n", 5, 15, "no such file"},
		{"output reference", head + "steps:\n  - {id: a, tool: fs_glob}\noutputs:\n  x: \"${{ steps.z.output }}\"\n", 6, 6, `no step "z"`},
		{"no steps", head + "steps: []\n", 3, 8, "at least one step"},
	}
	files := map[string]string{
		"sub.yaml":  subWorkflow,
		"loop.yaml": "version: 1\nname: loop\nsteps:\n  - id: again\n    workflow: w.yaml\n",
		"w.yaml":    "version: 1\nname: w\nsteps:\n  - id: a\n    workflow: loop.yaml\n",
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("w.yaml", []byte(tt.yaml), testOptions(files))
			if err == nil {
				t.Fatal("valid")
			}
			var pe *gate.PositionError
			if !errors.As(err, &pe) {
				t.Fatalf("not a PositionError: %T %v", err, err)
			}
			if pe.Line != tt.line || pe.Column != tt.col || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %d:%d %v\nwant %d:%d containing %q", pe.Line, pe.Column, err, tt.line, tt.col, tt.want)
			}
			if !strings.HasPrefix(pe.Error(), fmt.Sprintf("w.yaml:%d:%d: ", tt.line, tt.col)) {
				t.Errorf("message %q", pe.Error())
			}
		})
	}
}

// TestEveryErrorReported: problems in several places are all reported.
func TestEveryErrorReported(t *testing.T) {
	src := "version: 1\nname: w\nsteps:\n  - {id: a, tool: nope}\n  - {id: b, tool: fs_read, args: {path: \"${{ params.p }}\"}}\n  - {id: a, tool: fs_glob}\n"
	_, err := Parse("w.yaml", []byte(src), testOptions(nil))
	if err == nil {
		t.Fatal("valid")
	}
	if n := strings.Count(err.Error(), "w.yaml:"); n != 3 {
		t.Fatalf("%d errors:\n%v", n, err)
	}
}
