package gate

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/tool"
)

type countArgs struct {
	Name string `json:"name" minLength:"1"`
}

// countTool is a typed tool that counts the derivations of its schema
// (RefineSchema runs once per derivation) and its runs; open makes its
// refinement open the arguments object, which the registry must refuse.
type countTool struct {
	name    string
	derived atomic.Int32
	runs    atomic.Int32
	open    bool
}

func (c *countTool) Spec() tool.Spec {
	return tool.Spec{Name: c.name, Description: "counts", ReadOnly: true}
}

func (c *countTool) RefineSchema(s *jsonschema.Schema) {
	c.derived.Add(1)
	if c.open {
		s.AdditionalProperties = nil
	}
}

func (c *countTool) Needs(*tool.Call, *countArgs) ([]capability.Need, error) { return nil, nil }

func (c *countTool) Run(context.Context, *tool.Call, *countArgs) tool.Outcome {
	c.runs.Add(1)
	return tool.Outcome{Output: "ran"}
}

// TestRegisterDerivesNoSchema: registering typed tools derives and
// compiles none of their schemas (every process that builds the registry
// would pay for all of them); the first check of a tool's arguments
// derives its own, once, and checks as strictly as ever; listing the
// specs derives them all.
func TestRegisterDerivesNoSchema(t *testing.T) {
	a, b, c := &countTool{name: "a"}, &countTool{name: "b"}, &countTool{name: "c"}
	reg := NewRegistry()
	if err := reg.Register(tool.Adapt[countArgs](a), tool.Adapt[countArgs](b), tool.Adapt[countArgs](c)); err != nil {
		t.Fatal(err)
	}
	if n := a.derived.Load() + b.derived.Load() + c.derived.Load(); n != 0 {
		t.Fatalf("Register derived %d schemas", n)
	}
	for range 3 {
		if err := reg.CheckArgs("a", json.RawMessage(`{"name":"x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []string{`{"name":""}`, `{"name":"x","Name":"y"}`, `{"name":"x","extra":1}`, `{}`} {
		if err := reg.CheckArgs("a", json.RawMessage(bad)); codeOf(err) != tool.CodeInvalidInput {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if a.derived.Load() != 1 || b.derived.Load() != 0 || c.derived.Load() != 0 {
		t.Fatalf("derived a %d, b %d, c %d times; want 1, 0, 0", a.derived.Load(), b.derived.Load(), c.derived.Load())
	}
	specs := reg.Specs()
	if len(specs) != 3 || !strings.Contains(string(specs[1].InputSchema), `"additionalProperties":false`) {
		t.Fatalf("specs %+v", specs)
	}
}

// TestBrokenDerivedSchemaNeverRuns: a typed tool whose schema does not
// compile (its refinement opened the arguments object) is refused at
// registration or, its schema derived on first use, on every call — never
// run with arguments nothing checked.
func TestBrokenDerivedSchemaNeverRuns(t *testing.T) {
	ct := &countTool{name: "broken", open: true}
	reg := NewRegistry()
	if err := reg.Register(tool.Adapt[countArgs](ct)); err != nil {
		if !strings.Contains(err.Error(), "additionalProperties") {
			t.Fatalf("refused for another reason: %v", err)
		}
		return
	}
	p, err := policy.ParsePolicy("test", []byte("version: 1\ngrants: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	audit := &memAudit{}
	g, err := NewGate(GateOptions{Registry: reg, Policy: p, Audit: audit, Workspace: "/ws"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		res, err := g.Call(context.Background(), Request{Tool: "broken", Args: json.RawMessage(`{"name":"x","anything":1}`), Principal: []string{"test"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Success || res.Error == nil || res.Error.Code != tool.CodeInternal || !strings.Contains(res.Error.Message, "additionalProperties") {
			t.Fatalf("call of a tool whose schema does not compile: %+v", res)
		}
		if err := reg.CheckArgs("broken", json.RawMessage(`{"name":"x"}`)); codeOf(err) != tool.CodeInternal {
			t.Fatalf("CheckArgs: %v", err)
		}
	}
	if ct.runs.Load() != 0 {
		t.Fatalf("the tool ran %d times", ct.runs.Load())
	}
	if len(audit.events) != 2 || audit.last().Phase != PhaseResult || audit.last().Outcome != string(tool.CodeInternal) {
		t.Fatalf("the refusals are not on record: %+v", audit.events)
	}
}

func codeOf(err error) tool.Code {
	if err == nil {
		return ""
	}
	return tool.AsError(err).Code
}

// TestValidToolName: the hand-written check is the pattern it replaced,
// ^[a-zA-Z0-9_-]{1,64}$ (compiling which cost every process that built a
// registry more than checking all its names).
func TestValidToolName(t *testing.T) {
	pattern := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	names := []string{"", "a", "fs_read", "git-status", "A9", strings.Repeat("x", 64), strings.Repeat("x", 65),
		"a b", "a.b", "a/b", "é", "a\n", "\na", "a\x00", "ünï", "-", "_", "Z", "tool:x", "${x}", "a\u200bb"}
	for c := 0; c < 256; c++ {
		names = append(names, "x"+string(rune(c)), string([]byte{byte(c)}))
	}
	for _, n := range names {
		if got, want := ValidToolName(n), pattern.MatchString(n); got != want {
			t.Errorf("ValidToolName(%q) = %v, the pattern says %v", n, got, want)
		}
	}
}

// headTool has a Head method that returns a spec without its schema, as a
// typed tool's head: a tool that is not typed cannot pass for one and
// have its schema (here an open one) compiled later, or without the
// metaschema check.
type headTool struct{ openTool }

func (h *headTool) Head() tool.Spec { return tool.Spec{Name: "open"} }

func (h *headTool) head() tool.Spec { return tool.Spec{Name: "open"} }

func TestOnlyTypedToolsDefer(t *testing.T) {
	if _, deferred := tool.HeadOf(&headTool{}); deferred {
		t.Fatal("a tool that is not typed is taken for one")
	}
	if err := NewRegistry().Register(&headTool{}); err == nil || !strings.Contains(err.Error(), "additionalProperties") {
		t.Fatalf("the open schema of a tool with a Head method was not refused at registration: %v", err)
	}
}
