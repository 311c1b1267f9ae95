package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenrt/warden/builtin/fs"
	"github.com/wardenrt/warden/internal/runpatch"
	"github.com/wardenrt/warden/runtime/agent"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/store"
)

// listGate is a gate over warden's fs tools on a workspace of 20 files,
// granting reads (what instantModel's runs call).
func listGate(tb testing.TB) *gate.Gate {
	tb.Helper()
	ws, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	reg := gate.NewRegistry()
	if err := reg.Register(fs.Tools()...); err != nil {
		tb.Fatal(err)
	}
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%02d.txt", i)), []byte("x"), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	p, err := policy.ParsePolicy("bench", []byte(basePolicy))
	if err != nil {
		tb.Fatal(err)
	}
	g, err := gate.NewGate(gate.GateOptions{Registry: reg, Policy: p, Workspace: ws, Audit: &runtimetest.Audit{}})
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// patchSpy passes a run's record on to a store, patch by patch, noting
// what each patch sent, and meddles as told after a given patch.
type patchSpy struct {
	st      *store.Store
	sent    []int // elements sent by each patch that was written
	refused int   // patches the store refused with ErrConflict
	after   map[int]func(id string)
}

func (p *patchSpy) PutRun(ctx context.Context, id string, doc json.RawMessage) error {
	return errors.New("PutRun called: the record was written whole")
}

func (p *patchSpy) PatchRun(ctx context.Context, id string, patch runpatch.Patch) error {
	n := 0
	for _, l := range patch.Lists {
		n += len(l.Set)
	}
	err := p.st.PatchRun(ctx, id, patch)
	if errors.Is(err, runpatch.ErrConflict) {
		p.refused++
	}
	if err != nil {
		return err
	}
	p.sent = append(p.sent, n)
	if f := p.after[len(p.sent)]; f != nil {
		f(id)
	}
	return nil
}

// TestRecordInParts: with a store that keeps runs in parts, each step of
// an agent run writes the head and the new elements only — not the record
// so far — and the store gives back exactly the record the run returns:
// across a change of the system prompt (primed context), and across the
// run being written whole behind the loop's back (marked interrupted by
// another process), after which the loop sends everything once more.
func TestRecordInParts(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "warden.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	mem := &runtimetest.Memory{}
	spy := &patchSpy{st: st, after: map[int]func(string){
		20: func(id string) {
			if err := mem.PutMemory(ctx, gate.ContextNamespace(id), "plan", "a primed note"); err != nil {
				t.Error(err)
			}
		},
		10: func(id string) {
			err := st.UpdateRun(ctx, id, func(doc json.RawMessage) (json.RawMessage, error) {
				var m map[string]any
				if err := json.Unmarshal(doc, &m); err != nil {
					return nil, err
				}
				m["status"] = "interrupted"
				return json.Marshal(m)
			})
			if err != nil {
				t.Error(err)
			}
		},
	}}
	const steps = 40
	rec, err := agent.Run(ctx, agent.Options{Gate: listGate(t), Model: &instantModel{steps: steps}, Task: "list", Runs: spy, Memory: mem, MaxSteps: steps})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != agent.StatusSucceeded {
		t.Fatal(rec.Status, rec.Error)
	}
	want, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Run(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("the store holds\n%s\nthe run returned\n%s", got, want)
	}
	if spy.refused != 1 {
		t.Errorf("%d patches refused, want 1 (after the run was written whole)", spy.refused)
	}
	if len(spy.sent) < steps {
		t.Fatalf("%d patches written over %d steps", len(spy.sent), steps)
	}
	// A step adds an assistant message and a tool result to the
	// transcript, a response and a tool call: 4 elements (5 when the
	// system prompt changed). Only the first patch after the store was
	// written whole sends the record so far.
	for i, n := range spy.sent {
		if n > 5 && i != 10 {
			t.Errorf("patch %d sent %d elements: %v", i+1, n, spy.sent)
			break
		}
	}
	if spy.sent[10] < 3*10 {
		t.Errorf("the patch after the conflict sent %d elements, not the record so far", spy.sent[10])
	}
	if !strings.Contains(rec.Transcript[0].Content, "a primed note") {
		t.Errorf("the system prompt did not change: %q", rec.Transcript[0].Content)
	}
}
