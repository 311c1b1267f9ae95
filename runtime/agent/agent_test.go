package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/wardenrt/warden/internal/llmtest"
	"github.com/wardenrt/warden/runtime/agent"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// TestMultiStepTask: read a file, write a summary, answer — three steps,
// two tools, every call through the gate and on the audit log, the run
// recorded with its transcript and usage. Both transports.
func TestMultiStepTask(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "streaming"}[stream], func(t *testing.T) {
			e := newEnv(t)
			e.write("todo.txt", "buy milk\ncall bob\n")
			srv := llmtest.New(t,
				llmtest.Step{Content: "Reading the list.", ToolCalls: []llmtest.ToolCall{call("fs_read", `{"path":"todo.txt"}`)},
					Check: func(t testing.TB, req openai.ChatCompletionRequest) {
						if len(req.Tools) == 0 || req.Messages[0].Role != "system" || req.Messages[1].Content != "summarise todo.txt into notes/summary.md" {
							t.Errorf("first request: %d tools, messages %+v", len(req.Tools), req.Messages)
						}
						contains(t, "system prompt", req.Messages[0].Content, "fs.write:notes/**", "cannot change during this run")
					}},
				llmtest.Step{ToolCalls: []llmtest.ToolCall{call("fs_write", `{"path":"notes/summary.md","content":"2 items: milk, bob\n"}`)},
					Check: func(t testing.TB, req openai.ChatCompletionRequest) {
						contains(t, "fs_read result", lastTool(req.Messages), "buy milk", `"success":true`)
					}},
				llmtest.Step{Content: "Done: notes/summary.md lists 2 items.",
					Check: func(t testing.TB, req openai.ChatCompletionRequest) {
						contains(t, "fs_write result", lastTool(req.Messages), `"success":true`)
					}},
			)
			var texts []string
			o := e.options(basePolicy, srv, stream, "summarise todo.txt into notes/summary.md")
			o.Events = func(ev agent.Event) {
				if ev.Kind == agent.EventText {
					texts = append(texts, ev.Text)
				}
			}
			rec, err := agent.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Status != agent.StatusSucceeded || rec.Final != "Done: notes/summary.md lists 2 items." || rec.Steps != 3 {
				t.Fatalf("record: status %s, final %q, steps %d, error %+v", rec.Status, rec.Final, rec.Steps, rec.Error)
			}
			if b, err := os.ReadFile(filepath.Join(e.ws, "notes/summary.md")); err != nil || string(b) != "2 items: milk, bob\n" {
				t.Fatalf("summary: %q %v", b, err)
			}
			if stream && len(texts) < 3 {
				t.Errorf("streamed text arrived in %d pieces: %q", len(texts), texts)
			}
			if strings.Join(texts, "") != "Reading the list.Done: notes/summary.md lists 2 items." {
				t.Errorf("text events %q", texts)
			}
			// Each tool call is linked to its audit record.
			if len(rec.ToolCalls) != 2 {
				t.Fatalf("tool calls %+v", rec.ToolCalls)
			}
			for _, c := range rec.ToolCalls {
				ev := auditEvent(t, e.audit, c.AuditSeq)
				if ev.Tool != c.Tool || ev.CallID != c.CallID || ev.RunID != rec.ID || strings.Join(ev.Principal, ">") != "cli>model" || !c.Success {
					t.Errorf("call %+v, audit %+v", c, ev)
				}
			}
			saved, _ := savedRun(t, e.runs, rec.ID)
			if saved.Status != agent.StatusSucceeded || len(saved.Transcript) != 7 || len(saved.Responses) != 3 || saved.Usage.Total == 0 || saved.Ended == nil {
				t.Fatalf("saved: status %s, %d messages, %d responses, usage %+v", saved.Status, len(saved.Transcript), len(saved.Responses), saved.Usage)
			}
			if e.runs.Puts() < 4 { // start, each step, end
				t.Errorf("the record was written %d times", e.runs.Puts())
			}
		})
	}
}

// TestSeveralCallsOneAnswer: calls of one answer run in order, each
// answered with its own tool message.
func TestSeveralCallsOneAnswer(t *testing.T) {
	e := newEnv(t)
	e.write("a.txt", "alpha")
	e.write("b.txt", "beta")
	srv := llmtest.New(t,
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("fs_read", `{"path":"a.txt"}`), call("fs_read", `{"path":"b.txt"}`), call("fs_list", `{"path":"."}`)}},
		llmtest.Step{Content: "alpha beta", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
			tm := toolMessages(req.Messages)
			if len(tm) != 3 || !strings.Contains(tm[0], "alpha") || !strings.Contains(tm[1], "beta") || !strings.Contains(tm[2], "a.txt") {
				t.Errorf("tool messages %q", tm)
			}
			ids := map[string]bool{}
			for _, m := range req.Messages {
				if m.Role == "tool" {
					ids[m.ToolCallID] = true
				}
			}
			if len(ids) != 3 {
				t.Errorf("tool call ids %v", ids)
			}
		}},
	)
	rec, err := agent.Run(context.Background(), e.options(basePolicy, srv, true, "read both"))
	if err != nil || rec.Status != agent.StatusSucceeded || len(rec.ToolCalls) != 3 {
		t.Fatalf("%v %+v", err, rec)
	}
	if rec.ToolCalls[0].AuditSeq >= rec.ToolCalls[1].AuditSeq {
		t.Error("calls not run in order")
	}
}

// TestModelMistakesAreResults: an unknown tool, malformed arguments, a tool
// the run does not offer, a capability denial the model then works
// around, and an approval no one can give: each a result the model sees,
// the run goes on, and the grants never change.
func TestModelMistakesAreResults(t *testing.T) {
	e := newEnv(t)
	policy := basePolicy + "rules: [{tool: fs_remove, action: allow, require_approval: true}]\n"
	srv := llmtest.New(t,
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("rm_rf", `{}`)}},
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("fs_write", `{"path": "notes/x.md", "content": `)},
			Check: func(t testing.TB, req openai.ChatCompletionRequest) {
				contains(t, "unknown tool result", lastTool(req.Messages), "UNKNOWN_TOOL")
			}},
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("fs_write", `{"path":"README.md","content":"pwned"}`)},
			Check: func(t testing.TB, req openai.ChatCompletionRequest) {
				contains(t, "malformed result", lastTool(req.Messages), "INVALID_INPUT")
			}},
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("fs_write", `{"path":"notes/readme-draft.md","content":"draft"}`)},
			Check: func(t testing.TB, req openai.ChatCompletionRequest) {
				// The model is told what to ask the user for, not which flag to type.
				contains(t, "denied result", lastTool(req.Messages), "CAPABILITY_DENIED", "fs.write:README.md",
					`"hint":"ask the user to grant fs.write:README.md; your grants cannot change during this run"`, `"missing_grants":["fs.write:README.md"]`)
				notContains(t, "denied result", lastTool(req.Messages), "--grant")
			}},
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("fs_remove", `{"path":"notes/readme-draft.md"}`), call("shell", `{"command":"sleep 0"}`)},
			Check: func(t testing.TB, req openai.ChatCompletionRequest) {
				contains(t, "work-around result", lastTool(req.Messages), `"success":true`)
			}},
		llmtest.Step{Content: "Wrote notes/readme-draft.md; README.md needs fs.write:README.md.",
			Check: func(t testing.TB, req openai.ChatCompletionRequest) {
				tm := toolMessages(req.Messages)
				contains(t, "approval result", tm[len(tm)-2], "APPROVAL_REQUIRED", "ask the user to approve it, or to allow it in warden's policy", `"approval":{"rule":`)
				notContains(t, "approval result", tm[len(tm)-2], "--approve")
				contains(t, "not offered result", tm[len(tm)-1], "UNKNOWN_TOOL", "not one of the tools this run offers")
			}},
	)
	o := e.options(policy, srv, false, "update the readme")
	o.Tools = []string{"fs_read", "fs_write", "fs_remove"}
	rec, err := agent.Run(context.Background(), o)
	if err != nil || rec.Status != agent.StatusSucceeded {
		t.Fatalf("%v %+v", err, rec)
	}
	var codes []string
	for _, c := range rec.ToolCalls {
		codes = append(codes, c.Code)
	}
	if got := strings.Join(codes, ","); got != "UNKNOWN_TOOL,INVALID_INPUT,CAPABILITY_DENIED,,APPROVAL_REQUIRED,UNKNOWN_TOOL" {
		t.Fatalf("codes %s", got)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "README.md")); !errors.Is(err, os.ErrNotExist) {
		t.Error("README.md was written")
	}
	if b, _ := os.ReadFile(filepath.Join(e.ws, "notes/readme-draft.md")); string(b) != "draft" {
		t.Errorf("draft %q (the unapproved fs_remove must not have run)", b)
	}
	// The malformed arguments are recorded as sent; the offered tools are
	// the record's and the only ones the model was shown.
	if string(rec.ToolCalls[1].Args) != `"{\"path\": \"notes/x.md\", \"content\": "` {
		t.Errorf("malformed args recorded as %s", rec.ToolCalls[1].Args)
	}
	if strings.Join(rec.Tools, ",") != "fs_read,fs_remove,fs_write" || len(srv.Requests()[0].Tools) != 3 {
		t.Errorf("tools %v, sent %d", rec.Tools, len(srv.Requests()[0].Tools))
	}
}

// TestRetries: a 429 with Retry-After, then success; repeated 500s end
// the run with LLM_ERROR; empty choices are retried.
func TestRetries(t *testing.T) {
	e := newEnv(t)
	srv := llmtest.New(t,
		llmtest.Step{Status: 429, RetryAfter: "0.2", Content: "slow down"},
		llmtest.Step{EmptyChoices: true},
		llmtest.Step{Content: "fine"},
	)
	o := e.options(basePolicy, srv, false, "hi")
	m, err := agent.NewOpenAI(agent.OpenAIConfig{BaseURL: srv.URL, Model: "scripted", Retries: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	o.Model = m
	start := time.Now()
	rec, err := agent.Run(context.Background(), o)
	if err != nil || rec.Status != agent.StatusSucceeded || rec.Final != "fine" || rec.Responses[0].Attempts != 3 {
		t.Fatalf("%v %+v", err, rec)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("Retry-After 0.2 s not honoured: the run took %v", took)
	}

	srv = llmtest.New(t, llmtest.Step{Status: 500}, llmtest.Step{Status: 502, Body: "<html>bad gateway</html>"}, llmtest.Step{Status: 503}, llmtest.Step{Status: 500})
	rec, err = agent.Run(context.Background(), e.options(basePolicy, srv, true, "hi"))
	if err != nil || rec.Status != agent.StatusFailed || rec.Error == nil || rec.Error.Code != tool.CodeLLMError || !strings.Contains(rec.Error.Message, "failed 4 times") {
		t.Fatalf("%v %+v", err, rec.Error)
	}
	if srv.Remaining() != 0 {
		t.Errorf("%d scripted answers left", srv.Remaining())
	}

	// A 200 that is not JSON: a misconfigured endpoint, not retried.
	srv = llmtest.New(t, llmtest.Step{Body: "<html>welcome to nginx</html>"})
	rec, _ = agent.Run(context.Background(), e.options(basePolicy, srv, false, "hi"))
	if rec.Status != agent.StatusFailed || rec.Error.Code != tool.CodeLLMError || !strings.Contains(rec.Error.Hint, "OPENAI_BASE_URL") {
		t.Fatalf("%+v", rec.Error)
	}
}

// TestFinishReasonLength: cut text is continued; cut tool calls are not run.
func TestFinishReasonLength(t *testing.T) {
	e := newEnv(t)
	srv := llmtest.New(t,
		llmtest.Step{Content: "The answer is a long", FinishReason: "length"},
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("fs_write", `{"path":"notes/a.md","content":"tru`)}, FinishReason: "length",
			Check: func(t testing.TB, req openai.ChatCompletionRequest) {
				last := req.Messages[len(req.Messages)-1]
				contains(t, "continue message", last.Content, "cut off")
			}},
		llmtest.Step{Content: "story.", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
			contains(t, "cut call result", lastTool(req.Messages), "not run", "finish_reason=length")
		}},
	)
	rec, err := agent.Run(context.Background(), e.options(basePolicy, srv, false, "tell me"))
	if err != nil || rec.Status != agent.StatusSucceeded || rec.Final != "story." {
		t.Fatalf("%v %+v", err, rec)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "notes/a.md")); err == nil {
		t.Error("a cut tool call ran")
	}
	// Three cut replies in a row end the run.
	srv = llmtest.New(t, llmtest.Step{Content: "a", FinishReason: "length"}, llmtest.Step{Content: "b", FinishReason: "length"}, llmtest.Step{Content: "c", FinishReason: "length"})
	rec, _ = agent.Run(context.Background(), e.options(basePolicy, srv, false, "tell me"))
	if rec.Status != agent.StatusFailed || rec.Error.Code != tool.CodeLLMError {
		t.Fatalf("%+v", rec)
	}
}

// TestBudgets: steps and tokens.
func TestBudgets(t *testing.T) {
	e := newEnv(t)
	e.write("a.txt", "a")
	loop := llmtest.Step{ToolCalls: []llmtest.ToolCall{call("fs_read", `{"path":"a.txt"}`)}, PromptTokens: 100, CompletionTokens: 10}
	srv := llmtest.New(t, loop, loop, loop)
	o := e.options(basePolicy, srv, false, "loop")
	o.MaxSteps = 3
	rec, _ := agent.Run(context.Background(), o)
	if rec.Status != agent.StatusStopped || rec.Steps != 3 || !strings.Contains(rec.Error.Message, "3 steps") {
		t.Fatalf("%+v", rec)
	}
	srv = llmtest.New(t, loop, loop)
	o = e.options(basePolicy, srv, false, "loop")
	o.TokenBudget = 200
	rec, _ = agent.Run(context.Background(), o)
	if rec.Status != agent.StatusStopped || rec.Steps != 2 || rec.Usage.Total != 220 {
		t.Fatalf("%+v", rec)
	}
}

// TestContextOverflowTrims: an overflow trims old tool outputs (the system
// prompt and the task stay) and asks again; with nothing left to trim the
// run fails saying why.
func TestContextOverflowTrims(t *testing.T) {
	e := newEnv(t)
	e.write("big.txt", strings.Repeat("lorem ipsum ", 500))
	overflow := llmtest.Step{Status: 400, Content: "This model's maximum context length is 4096 tokens. However, your messages resulted in 9000 tokens."}
	srv := llmtest.New(t,
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("fs_read", `{"path":"big.txt"}`)}},
		overflow,
		llmtest.Step{Content: "ok", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
			if req.Messages[1].Content != "summarise big.txt" || !strings.Contains(req.Messages[0].Content, "warden") {
				t.Errorf("system prompt or task lost: %+v", req.Messages[:2])
			}
			contains(t, "trimmed tool output", lastTool(req.Messages), "trimmed to fit")
		}},
	)
	rec, err := agent.Run(context.Background(), e.options(basePolicy, srv, false, "summarise big.txt"))
	if err != nil || rec.Status != agent.StatusSucceeded {
		t.Fatalf("%v %+v", err, rec)
	}
	srv = llmtest.New(t, overflow)
	rec, _ = agent.Run(context.Background(), e.options(basePolicy, srv, false, "summarise big.txt"))
	if rec.Status != agent.StatusFailed || rec.Error.Code != tool.CodeLLMError || !strings.Contains(rec.Error.Message, "context window") {
		t.Fatalf("%+v", rec.Error)
	}
}

// TestCancelledRun: Ctrl-C while a tool runs: the tool's process is
// stopped, the run is recorded as cancelled and the audit log has the
// call's result.
func TestCancelledRun(t *testing.T) {
	e := newEnv(t)
	srv := llmtest.New(t, llmtest.Step{ToolCalls: []llmtest.ToolCall{call("shell", `{"command":"sleep 31.4159"}`), call("fs_list", `{"path":"."}`)}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o := e.options(basePolicy, srv, false, "wait")
	var started atomic.Bool
	o.Events = func(ev agent.Event) {
		if ev.Kind == agent.EventToolCall && ev.Tool == "shell" && !started.Swap(true) {
			time.AfterFunc(300*time.Millisecond, cancel)
		}
	}
	start := time.Now()
	rec, err := agent.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("cancel took %v", took)
	}
	saved, _ := savedRun(t, e.runs, rec.ID)
	if saved.Status != agent.StatusCancelled || saved.Ended == nil {
		t.Fatalf("saved %+v", saved)
	}
	if len(rec.ToolCalls) != 2 || rec.ToolCalls[0].Success || !strings.Contains(rec.ToolCalls[0].Output, "was cancelled") ||
		rec.ToolCalls[1].Code != string(tool.CodeOperationNotSupported) {
		t.Fatalf("tool calls %+v", rec.ToolCalls)
	}
	if ev := auditEvent(t, e.audit, rec.ToolCalls[0].AuditSeq); ev.Phase != gate.PhaseResult || ev.Outcome == "ok" {
		t.Errorf("the shell call's audit result %+v", ev)
	}
	// The program the tool started is gone.
	var left []string
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		left = left[:0]
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "31.4159") {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("processes left after the cancelled run: %v", left)
	}
}

// TestPrimedContextInPrompt: what prime_context stores for the run is in
// the next request's system prompt; clear_context takes it out.
func TestPrimedContextInPrompt(t *testing.T) {
	e := newEnv(t)
	e.write("spec.md", "the spec says 42")
	srv := llmtest.New(t,
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("prime_context", `{"files":["spec.md"]}`)}},
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("clear_context", `{}`)},
			Check: func(t testing.TB, req openai.ChatCompletionRequest) {
				contains(t, "system prompt", req.Messages[0].Content, "Context primed for this run", "the spec says 42")
			}},
		llmtest.Step{Content: "42", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
			if strings.Contains(req.Messages[0].Content, "the spec says 42") {
				t.Error("the context is still in the prompt after clear_context")
			}
		}},
	)
	rec, err := agent.Run(context.Background(), e.options(basePolicy, srv, false, "what does the spec say?"))
	if err != nil || rec.Status != agent.StatusSucceeded {
		t.Fatalf("%v %+v", err, rec)
	}
}

// TestRecordRedacted: a secret in the task, an argument and the model's
// text never reaches the record.
func TestRecordRedacted(t *testing.T) {
	e := newEnv(t)
	const secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	srv := llmtest.New(t,
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("fs_write", `{"path":"notes/k.md","content":"token `+secret+`"}`)}},
		llmtest.Step{Content: "stored " + secret},
	)
	rec, err := agent.Run(context.Background(), e.options(basePolicy, srv, false, "store the token "+secret))
	if err != nil || rec.Status != agent.StatusSucceeded {
		t.Fatalf("%v %+v", err, rec)
	}
	_, doc := savedRun(t, e.runs, rec.ID)
	if strings.Contains(doc, secret) || strings.Contains(doc, "sk-test-0123456789") {
		t.Fatalf("a secret reached the record:\n%s", doc)
	}
}

// TestReplay: a recorded run replayed offline through today's gate as dry
// runs matches its recording; after a policy change that drops the write
// grant, the replay reports the call that is now refused.
func TestReplay(t *testing.T) {
	e := newEnv(t)
	e.write("todo.txt", "milk")
	srv := llmtest.New(t,
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("fs_read", `{"path":"todo.txt"}`)}},
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("fs_write", `{"path":"notes/s.md","content":"milk"}`)}},
		llmtest.Step{Content: "done"},
	)
	rec, err := agent.Run(context.Background(), e.options(basePolicy, srv, false, "copy"))
	if err != nil || rec.Status != agent.StatusSucceeded {
		t.Fatalf("%v %+v", err, rec)
	}
	recorded, _ := savedRun(t, e.runs, rec.ID)
	if err := os.Remove(filepath.Join(e.ws, "notes/s.md")); err != nil {
		t.Fatal(err)
	}

	same, err := agent.Replay(context.Background(), recorded, agent.Options{Gate: e.gate(basePolicy), DryRun: true, Runs: e.runs})
	if err != nil {
		t.Fatal(err)
	}
	if same.Status != agent.StatusSucceeded || len(same.Diffs) != 0 || same.ReplayOf != rec.ID || same.Kind != "replay" || same.ID == rec.ID {
		t.Fatalf("replay: %+v", same)
	}
	if !same.ToolCalls[1].DryRun {
		t.Error("the replayed write was not a dry run")
	}
	if _, err := os.Stat(filepath.Join(e.ws, "notes/s.md")); err == nil {
		t.Fatal("a dry-run replay wrote a file")
	}
	if srv.Remaining() != 0 || len(srv.Requests()) != 3 {
		t.Fatal("the replay asked the model")
	}

	strict := "version: 1\ngrants: [\"fs.read:**\"]\n"
	changed, err := agent.Replay(context.Background(), recorded, agent.Options{Gate: e.gate(strict), DryRun: true, Runs: e.runs})
	if err != nil {
		t.Fatal(err)
	}
	if len(changed.Diffs) != 1 || changed.Diffs[0].Tool != "fs_write" || changed.Diffs[0].Recorded != "ok" || changed.Diffs[0].Now != "CAPABILITY_DENIED" {
		t.Fatalf("diffs %+v", changed.Diffs)
	}
	saved, _ := savedRun(t, e.runs, changed.ID)
	if len(saved.Diffs) != 1 {
		t.Fatalf("the replay's record has no differences: %+v", saved)
	}
	b, _ := json.Marshal(changed.Diffs[0])
	t.Logf("difference: %s — %s", b, changed.Diffs[0])
}

// TestRecordMarshalledIncrementally: the record written after each step
// is exactly json.Marshal of the record, and round-trips.
func TestRecordMarshalledIncrementally(t *testing.T) {
	e := newEnv(t)
	e.write("a.txt", `quote " and "transcript":null inside`)
	srv := llmtest.New(t,
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("fs_read", `{"path":"a.txt"}`)}},
		llmtest.Step{ToolCalls: []llmtest.ToolCall{call("prime_context", `{"text":"\"tool_calls\":null"}`)}},
		llmtest.Step{Content: `"responses":null`},
	)
	rec, err := agent.Run(context.Background(), e.options(basePolicy, srv, false, `task "transcript":null`))
	if err != nil || rec.Status != agent.StatusSucceeded {
		t.Fatalf("%v %+v", err, rec)
	}
	saved, doc := savedRun(t, e.runs, rec.ID)
	want, _ := json.Marshal(rec)
	if doc != string(want) {
		t.Fatalf("saved record differs from json.Marshal:\n%s\n%s", doc, want)
	}
	if len(saved.Transcript) != len(rec.Transcript) || saved.Transcript[0].Content != rec.Transcript[0].Content {
		t.Fatal("the transcript did not round-trip")
	}
}
