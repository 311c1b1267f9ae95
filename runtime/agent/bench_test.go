package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/wardenrt/warden/builtin/fs"
	"github.com/wardenrt/warden/internal/runpatch"
	"github.com/wardenrt/warden/runtime/agent"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/store"
)

// instantModel answers at once, in-process: steps-1 answers each calling
// fs_list, then a final answer. It stands for a model that costs nothing,
// so that what remains is the loop's own cost and the tool's.
type instantModel struct {
	steps, n int
}

func (m *instantModel) Complete(_ context.Context, _ agent.ModelRequest, onText func(string)) (agent.ModelResponse, error) {
	m.n++
	if m.n >= m.steps {
		return agent.ModelResponse{Message: agent.Message{Role: "assistant", Content: "done"}, FinishReason: "stop", Usage: agent.Usage{Prompt: 100, Completion: 5, Total: 105}}, nil
	}
	return agent.ModelResponse{
		Message: agent.Message{Role: "assistant", ToolCalls: []openai.ToolCall{{
			ID: fmt.Sprintf("call_%d", m.n), Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: "fs_list", Arguments: `{"path":"."}`},
		}}},
		FinishReason: "tool_calls", Usage: agent.Usage{Prompt: 100, Completion: 20, Total: 120},
	}, nil
}

// BenchmarkLoopStep is issue 5's benchmark: the loop's own cost per step
// beyond model and tool time. Each iteration is a run of 10 steps (9 tool
// calls of fs_list on a 20-file workspace, then a final answer) with a
// model that answers at once, next to the same 9 calls straight through
// the gate; ns/step of the difference is the loop's cost:
//
//	gate-only     9 fs_list calls through the gate (audit in memory)
//	loop          the 10-step run, its record kept in memory
//	loop-durable  the same, its record written to a bbolt store after
//	              every step (as `warden run` does)
func BenchmarkLoopStep(b *testing.B) {
	const steps = 10
	ctx := context.Background()
	setup := func(b *testing.B) *gate.Gate {
		ws, err := filepath.EvalSymlinks(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		reg := gate.NewRegistry()
		if err := reg.Register(fs.Tools()...); err != nil {
			b.Fatal(err)
		}
		for i := range 20 {
			if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%02d.txt", i)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		p, err := policy.ParsePolicy("bench", []byte(basePolicy))
		if err != nil {
			b.Fatal(err)
		}
		g, err := gate.NewGate(gate.GateOptions{Registry: reg, Policy: p, Workspace: ws, Audit: &runtimetest.Audit{}})
		if err != nil {
			b.Fatal(err)
		}
		return g
	}
	b.Run("gate-only", func(b *testing.B) {
		g := setup(b)
		req := gate.Request{Tool: "fs_list", Args: json.RawMessage(`{"path":"."}`), Principal: []string{"cli", "model"}}
		for b.Loop() {
			for range steps - 1 {
				if res, err := g.Call(ctx, req); err != nil || !res.Success {
					b.Fatal(err, res.Error)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
	})
	run := func(b *testing.B, runs agent.Runs) {
		g := setup(b)
		for b.Loop() {
			rec, err := agent.Run(ctx, agent.Options{Gate: g, Model: &instantModel{steps: steps}, Task: "list", Runs: runs})
			if err != nil || rec.Status != agent.StatusSucceeded || len(rec.ToolCalls) != steps-1 {
				b.Fatal(err, rec.Status, rec.Error)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
	}
	b.Run("loop", func(b *testing.B) { run(b, &runtimetest.Runs{}) })
	b.Run("loop-durable", func(b *testing.B) {
		st, err := store.Open(filepath.Join(b.TempDir(), "warden.db"), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		run(b, st)
	})
}

// timedRuns writes a run's record to a store, whole, timing each write.
type timedRuns struct {
	st    *store.Store
	times []time.Duration
	bytes []int
}

func (r *timedRuns) PutRun(ctx context.Context, id string, doc json.RawMessage) error {
	t0 := time.Now()
	err := r.st.PutRun(ctx, id, doc)
	r.times, r.bytes = append(r.times, time.Since(t0)), append(r.bytes, len(doc))
	return err
}

// timedPatches writes it in parts.
type timedPatches struct{ timedRuns }

func (r *timedPatches) PatchRun(ctx context.Context, id string, p runpatch.Patch) error {
	n := len(p.Head)
	for _, l := range p.Lists {
		for _, e := range l.Set {
			n += len(e)
		}
	}
	t0 := time.Now()
	err := r.st.PatchRun(ctx, id, p)
	r.times, r.bytes = append(r.times, time.Since(t0)), append(r.bytes, n)
	return err
}

// BenchmarkRunRecord500 is the durable cost of a step's record in a long
// agent run: a 500-step run (fs_list each step, a model that answers at
// once) writing its record to a bbolt store after every step, in parts
// (what `warden run` does) and, as the baseline, whole (as before). It
// reports the median write of steps 1-10 and of steps 491-500, their
// ratio, and the bytes written at step 500.
func BenchmarkRunRecord500(b *testing.B) {
	const steps = 500
	ctx := context.Background()
	for _, mode := range []string{"parts", "whole"} {
		b.Run(mode, func(b *testing.B) {
			g := listGate(b)
			st, err := store.Open(filepath.Join(b.TempDir(), "warden.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			var first, last []time.Duration
			var lastBytes int
			for b.Loop() {
				tr := &timedPatches{timedRuns{st: st}}
				var runs agent.Runs = &tr.timedRuns
				if mode == "parts" {
					runs = tr
				}
				rec, err := agent.Run(ctx, agent.Options{Gate: g, Model: &instantModel{steps: steps}, Task: "list", Runs: runs, MaxSteps: steps})
				if err != nil || rec.Status != agent.StatusSucceeded {
					b.Fatal(err)
				}
				// Write 0 is the run's start; write i follows step i.
				first = append(first, tr.times[1:11]...)
				last = append(last, tr.times[steps-10:steps]...)
				lastBytes = tr.bytes[steps-1]
			}
			slices.Sort(first)
			slices.Sort(last)
			m1, m500 := first[len(first)/2], last[len(last)/2]
			b.ReportMetric(float64(m1.Nanoseconds()), "step1-ns")
			b.ReportMetric(float64(m500.Nanoseconds()), "step500-ns")
			b.ReportMetric(float64(m500)/float64(m1), "ratio")
			b.ReportMetric(float64(lastBytes), "step500-bytes")
		})
	}
}
