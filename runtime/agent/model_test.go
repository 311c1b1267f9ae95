package agent_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/wardenrt/warden/internal/llmtest"
	"github.com/wardenrt/warden/runtime/agent"
	"github.com/wardenrt/warden/runtime/tool"
)

// sse serves one streamed answer made of the given choices.
func sse(chunks ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[%s]}\n\n", c)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

func streamed(t *testing.T, h http.HandlerFunc) agent.ModelResponse {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	m, err := agent.NewOpenAI(agent.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "m", Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Complete(context.Background(), agent.ModelRequest{Messages: []agent.Message{{Role: "user", Content: "x"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func callsOf(resp agent.ModelResponse) string {
	var s []string
	for _, tc := range resp.Message.ToolCalls {
		s = append(s, tc.ID+" "+tc.Function.Name+" "+tc.Function.Arguments)
	}
	return strings.Join(s, " | ")
}

// TestStreamedToolCallsAssembled: servers that reuse index 0 for every
// call (Ollama) and servers that send argument fragments without an index
// both give the calls the model made.
func TestStreamedToolCallsAssembled(t *testing.T) {
	resp := streamed(t, sse(
		`{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"fs_read","arguments":"{\"path\":\"a\"}"}}]}}`,
		`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"fs_read","arguments":"{\"path\":\"b\"}"}}]},"finish_reason":"tool_calls"}`,
	))
	if got := callsOf(resp); got != `call_a fs_read {"path":"a"} | call_b fs_read {"path":"b"}` {
		t.Errorf("index reused: %s", got)
	}
	resp = streamed(t, sse(
		`{"index":0,"delta":{"role":"assistant","tool_calls":[{"id":"call_a","type":"function","function":{"name":"fs_read","arguments":"{\"pa"}}]}}`,
		`{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"th\":\"a\"}"}}]},"finish_reason":"tool_calls"}`,
	))
	if got := callsOf(resp); got != `call_a fs_read {"path":"a"}` {
		t.Errorf("fragments without index: %s", got)
	}
}

// TestSlowStreamIsNotCutOff: the attempt timeout bounds the wait for each
// chunk, not a long answer; a stream that stops is retried, and the
// terminal is told before the answer is shown again.
func TestSlowStreamIsNotCutOff(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stall := n.Add(1) == 1
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 10 {
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"}}]}\n\n", i)
			w.(http.Flusher).Flush()
			// Each gap is well under the attempt timeout (6×, so a loaded
			// machine does not turn it into a stall); the whole answer
			// takes longer than the timeout.
			wait := 250 * time.Millisecond
			if stall && i == 2 {
				wait = time.Minute // the first answer stops sending
			}
			select {
			case <-r.Context().Done():
				return
			case <-time.After(wait):
			}
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()
	m, err := agent.NewOpenAI(agent.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "m", Stream: true, Retries: 2,
		BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, AttemptTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var shown strings.Builder
	resp, err := m.Complete(context.Background(), agent.ModelRequest{Messages: []agent.Message{{Role: "user", Content: "x"}}}, func(s string) { shown.WriteString(s) })
	if err != nil {
		t.Fatal(err)
	}
	// The second answer took 2.5 s, more than the attempt timeout, and
	// was not cut.
	if resp.Message.Content != "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 " || resp.Attempts != 2 {
		t.Errorf("answer %q after %d attempts", resp.Message.Content, resp.Attempts)
	}
	if want := "w0 w1 w2 \n[the answer was interrupted; asking again]\nw0 w1 w2 w3 w4 w5 w6 w7 w8 w9 "; shown.String() != want {
		t.Errorf("shown %q", shown.String())
	}
}

// TestOverflowRecognised: OpenAI's code and llama.cpp's error type.
func TestOverflowRecognised(t *testing.T) {
	for _, body := range []string{
		`{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens)","type":"exceed_context_size_error"}}`,
		`{"error":{"code":"context_length_exceeded","message":"too long","type":"invalid_request_error"}}`,
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			fmt.Fprint(w, body)
		}))
		m, _ := agent.NewOpenAI(agent.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "m"})
		_, err := m.Complete(context.Background(), agent.ModelRequest{Messages: []agent.Message{{Role: "user", Content: "x"}}}, nil)
		srv.Close()
		if !errors.Is(err, agent.ErrContextOverflow) {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// TestRetryAfterOutOfRange: a Retry-After of "inf" waits the cap, not 0.
func TestRetryAfterOutOfRange(t *testing.T) {
	srv := llmtest.New(t, llmtest.Step{Status: 429, RetryAfter: "1e300"}, llmtest.Step{Content: "ok"})
	m, _ := agent.NewOpenAI(agent.OpenAIConfig{BaseURL: srv.URL, Model: "m", BaseDelay: time.Millisecond, MaxDelay: 150 * time.Millisecond})
	start := time.Now()
	if _, err := m.Complete(context.Background(), agent.ModelRequest{Messages: []agent.Message{{Role: "user", Content: "x"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("retried after %v: the huge Retry-After was not capped to MaxDelay", took)
	}
}

// TestEveryMessageFieldRedacted: reasoning, refusal, multi-part content,
// names and ids of the model's messages reach the record redacted.
func TestEveryMessageFieldRedacted(t *testing.T) {
	const secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop",
			"message":{"role":"assistant","content":[{"type":"text","text":"final %[1]s"}],"reasoning_content":"thinking %[1]s","refusal":"no %[1]s","name":"%[1]s"}}],
			"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, secret)
	}))
	defer srv.Close()
	e := newEnv(t)
	m, _ := agent.NewOpenAI(agent.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "m"})
	o := e.options(basePolicy, nil, false, "hi")
	o.Model = m
	rec, err := agent.Run(context.Background(), o)
	if err != nil || rec.Status != agent.StatusSucceeded {
		t.Fatalf("%v %+v", err, rec)
	}
	if rec.Final != "final [REDACTED]" {
		t.Errorf("final %q", rec.Final)
	}
	_, doc := savedRun(t, e.runs, rec.ID)
	if strings.Contains(doc, secret) {
		t.Fatalf("a secret reached the record:\n%s", doc)
	}
}

// TestEmptyCutReplyLeftOut: a reply cut off before any text is not sent
// back as an empty assistant message (which endpoints refuse).
func TestEmptyCutReplyLeftOut(t *testing.T) {
	e := newEnv(t)
	srv := llmtest.New(t,
		llmtest.Step{FinishReason: "length"},
		llmtest.Step{Content: "ok", Check: func(t testing.TB, req openai.ChatCompletionRequest) {
			for _, m := range req.Messages {
				if m.Role == "assistant" && m.Content == "" && len(m.ToolCalls) == 0 {
					t.Errorf("an empty assistant message was sent: %+v", req.Messages)
				}
			}
		}},
	)
	rec, err := agent.Run(context.Background(), e.options(basePolicy, srv, false, "hi"))
	if err != nil || rec.Status != agent.StatusSucceeded {
		t.Fatalf("%v %+v", err, rec)
	}
}

// TestRunTimeoutIsStopped: the run's deadline stops it (TIMEOUT); it is
// not recorded as the person cancelling it.
func TestRunTimeoutIsStopped(t *testing.T) {
	e := newEnv(t)
	srv := llmtest.New(t, llmtest.Step{Delay: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	rec, err := agent.Run(ctx, e.options(basePolicy, srv, false, "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != agent.StatusStopped || rec.Error == nil || rec.Error.Code != tool.CodeTimeout {
		t.Fatalf("%s %+v", rec.Status, rec.Error)
	}
}

// TestAnswerTooLarge: an endpoint that answers without end — streamed or
// not — is cut at the cap, and the call fails saying so.
func TestAnswerTooLarge(t *testing.T) {
	for _, stream := range []bool{false, true} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			chunk := []byte(strings.Repeat(" ", 64<<10))
			if stream {
				w.Header().Set("Content-Type", "text/event-stream")
				chunk = []byte("data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + strings.Repeat("a", 64<<10) + "\"}}]}\n\n")
			} else {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"`)
			}
			for r.Context().Err() == nil {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}))
		m, err := agent.NewOpenAI(agent.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "m", Stream: stream, MaxResponseBytes: 1 << 20, Retries: 1, BaseDelay: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Complete(context.Background(), agent.ModelRequest{Messages: []agent.Message{{Role: "user", Content: "x"}}}, nil)
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "more than 1 MiB") {
			t.Errorf("stream %v: %v", stream, err)
		}
	}
}
