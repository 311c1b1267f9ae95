// Package llmtest provides a scripted, local OpenAI Chat Completions server
// for testing code that talks to an LLM (such as an agent loop) offline.
//
// The server is a real HTTP server (net/http/httptest) that answers
// POST {URL}/chat/completions, in both the plain JSON and the streaming
// (server-sent events) forms, exactly as github.com/sashabaranov/go-openai
// expects. Each request consumes the next Step of the script:
//
//	srv := llmtest.New(t,
//		llmtest.Step{ToolCalls: []llmtest.ToolCall{{Name: "read_file", Arguments: `{"path":"a.txt"}`}}},
//		llmtest.Step{Content: "done"},
//	)
//	cfg := openai.DefaultConfig("test-key")
//	cfg.BaseURL = srv.URL
//	client := openai.NewClientWithConfig(cfg)
//
// The server records every request (decoded into
// openai.ChatCompletionRequest) and nothing else: no headers, no credentials.
package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// ToolCall is one scripted tool call.
type ToolCall struct {
	ID        string // default "call_<n>" (unique within the server)
	Name      string
	Arguments string // raw text, sent as is (may be malformed JSON on purpose)
}

// Step is one scripted answer, consumed in order, one per request.
//
// A step is consumed when its request arrives, even if the answer is never
// delivered (for example because the client gave up during Delay).
type Step struct {
	// Status is the HTTP status; 0 means 200. A non-200 status answers with
	// an OpenAI-style JSON error body
	// {"error":{"message":...,"type":...,"code":...}} unless Body is set; the
	// message is Content if set, else a generic one naming the status.
	Status int
	// RetryAfter is the value of a Retry-After header, if set.
	RetryAfter string
	// Body overrides the whole response body (e.g. "<html>not json</html>");
	// it is sent with Status (default 200) and Content-Type text/html, in
	// both streaming and non-streaming mode.
	Body string
	// Delay is a wait before answering. It ends early, with no answer, if
	// the request's context is done (the client gave up) or the server is
	// closing.
	Delay time.Duration
	// Content is the assistant's text.
	Content string
	// ToolCalls are the assistant's tool calls.
	ToolCalls []ToolCall
	// FinishReason defaults to "tool_calls" when ToolCalls is non-empty,
	// else "stop"; it may be set to e.g. "length".
	FinishReason string
	// EmptyChoices answers 200 with "choices": [] (streaming: chunks with
	// empty choices, then [DONE]).
	EmptyChoices bool
	// PromptTokens and CompletionTokens are reported as usage; when zero
	// they default to rough estimates (bytes/4, at least 1), so usage is
	// never zero.
	PromptTokens, CompletionTokens int
	// Check, if set, is called with the decoded request (after it has been
	// recorded, before Delay). It runs on the server's handler goroutine,
	// not the test goroutine: report failures with t.Errorf (or t.Error),
	// never t.Fatal/t.FailNow/t.SkipNow.
	Check func(t testing.TB, req openai.ChatCompletionRequest)
	// Respond, if set, computes the answer from the request — as a model
	// would, copying text from the conversation into its tool calls. Its
	// result replaces the step (Check and Respond of the result are not
	// used). It runs on the server's handler goroutine, like Check.
	Respond func(t testing.TB, req openai.ChatCompletionRequest) Step
}

// Server is a running scripted Chat Completions server. Create it with New.
type Server struct {
	// URL is the base URL to use as openai.ClientConfig.BaseURL; it ends
	// in "/v1".
	URL string

	t    testing.TB
	srv  *httptest.Server
	done chan struct{} // closed when the server is shutting down

	mu       sync.Mutex
	steps    []Step
	requests []openai.ChatCompletionRequest
	calls    int // tool calls answered so far (for default IDs)
}

// New starts a server that answers with steps, in order, and closes it
// with t.Cleanup. Any request beyond the script fails the test (t.Errorf)
// and is answered with HTTP 500.
func New(t testing.TB, steps ...Step) *Server {
	t.Helper()
	s := &Server{t: t, done: make(chan struct{}), steps: append([]Step(nil), steps...)}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.handle)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("llmtest: unexpected request %s %s", r.Method, r.URL.Path)
		writeError(w, http.StatusNotFound, "llmtest: unknown endpoint "+r.URL.Path)
	})
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + "/v1"
	t.Cleanup(func() {
		close(s.done)
		s.srv.Close()
	})
	return s
}

// Requests returns every request received so far, decoded, in order
// (including requests beyond the script). It is safe for concurrent use.
func (s *Server) Requests() []openai.ChatCompletionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]openai.ChatCompletionRequest(nil), s.requests...)
}

// Add appends steps to the script. It is safe for concurrent use.
func (s *Server) Add(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, steps...)
}

// Remaining reports how many steps have not been consumed yet.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.steps)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	t := s.t
	if r.Method != http.MethodPost {
		t.Errorf("llmtest: unexpected method %s for %s", r.Method, r.URL.Path)
		writeError(w, http.StatusMethodNotAllowed, "llmtest: method not allowed")
		return
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		if tok, ok := strings.CutPrefix(auth, "Bearer "); !ok || strings.TrimSpace(tok) == "" {
			t.Errorf("llmtest: malformed Authorization header (want \"Bearer <token>\")")
			writeError(w, http.StatusUnauthorized, "llmtest: malformed Authorization header")
			return
		}
	}
	var req openai.ChatCompletionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		t.Errorf("llmtest: cannot decode request body: %v", err)
		writeError(w, http.StatusBadRequest, "llmtest: bad request body: "+err.Error())
		return
	}

	s.mu.Lock()
	s.requests = append(s.requests, req)
	n := len(s.requests)
	if len(s.steps) == 0 {
		s.mu.Unlock()
		t.Errorf("llmtest: request %d beyond the script", n)
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("llmtest: request %d beyond the script", n))
		return
	}
	st := s.steps[0]
	s.steps = s.steps[1:]
	if st.Respond != nil {
		s.mu.Unlock()
		check, respond := st.Check, st.Respond
		if check != nil {
			check(t, req)
		}
		st = respond(t, req)
		st.Check, st.Respond = nil, nil
		s.mu.Lock()
	}
	st.ToolCalls = append([]ToolCall(nil), st.ToolCalls...)
	for i := range st.ToolCalls {
		s.calls++
		if st.ToolCalls[i].ID == "" {
			st.ToolCalls[i].ID = fmt.Sprintf("call_%d", s.calls)
		}
	}
	s.mu.Unlock()

	if st.Check != nil {
		st.Check(t, req)
	}
	if st.Delay > 0 {
		timer := time.NewTimer(st.Delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}

	if st.RetryAfter != "" {
		w.Header().Set("Retry-After", st.RetryAfter)
	}
	status := st.Status
	if status == 0 {
		status = http.StatusOK
	}
	switch {
	case st.Body != "":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(st.Body))
		return
	case status != http.StatusOK:
		msg := st.Content
		if msg == "" {
			msg = fmt.Sprintf("llmtest: scripted error %d %s", status, http.StatusText(status))
		}
		writeError(w, status, msg)
		return
	}

	a := answer{
		id:      fmt.Sprintf("chatcmpl-llmtest-%d", n),
		created: time.Now().Unix(),
		model:   req.Model,
		step:    st,
		usage:   usageFor(st, req),
	}
	if req.Stream {
		s.stream(w, r, a, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	a.writeJSON(w)
}

// answer holds what is needed to render a successful response.
type answer struct {
	id      string
	created int64
	model   string
	step    Step
	usage   wireUsage
}

// Wire types, so the JSON is exactly what the OpenAI API sends.
type (
	wireFunction struct {
		Name      string  `json:"name,omitempty"`
		Arguments *string `json:"arguments,omitempty"`
	}
	wireToolCall struct {
		Index    *int         `json:"index,omitempty"`
		ID       string       `json:"id,omitempty"`
		Type     string       `json:"type,omitempty"`
		Function wireFunction `json:"function"`
	}
	wireMessage struct {
		Role      string         `json:"role"`
		Content   *string        `json:"content"`
		ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
	}
	wireChoice struct {
		Index        int         `json:"index"`
		Message      wireMessage `json:"message"`
		FinishReason string      `json:"finish_reason"`
	}
	wireUsage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
	wireResponse struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []wireChoice `json:"choices"`
		Usage   wireUsage    `json:"usage"`
	}
	wireDelta struct {
		Role      string         `json:"role,omitempty"`
		Content   string         `json:"content,omitempty"`
		ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
	}
	wireChunkChoice struct {
		Index        int       `json:"index"`
		Delta        wireDelta `json:"delta"`
		FinishReason *string   `json:"finish_reason"`
	}
	wireChunk struct {
		ID      string            `json:"id"`
		Object  string            `json:"object"`
		Created int64             `json:"created"`
		Model   string            `json:"model"`
		Choices []wireChunkChoice `json:"choices"`
		Usage   *wireUsage        `json:"usage,omitempty"`
	}
)

func (a answer) finishReason() string {
	switch {
	case a.step.FinishReason != "":
		return a.step.FinishReason
	case len(a.step.ToolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}

func (a answer) writeJSON(w http.ResponseWriter) {
	resp := wireResponse{
		ID: a.id, Object: "chat.completion", Created: a.created, Model: a.model,
		Choices: []wireChoice{}, Usage: a.usage,
	}
	if !a.step.EmptyChoices {
		msg := wireMessage{Role: openai.ChatMessageRoleAssistant}
		if a.step.Content != "" {
			msg.Content = &a.step.Content
		}
		for _, tc := range a.step.ToolCalls {
			args := tc.Arguments
			msg.ToolCalls = append(msg.ToolCalls, wireToolCall{
				ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: &args},
			})
		}
		resp.Choices = append(resp.Choices, wireChoice{Message: msg, FinishReason: a.finishReason()})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// stream answers as server-sent events, flushing after each event, and
// stops early if the client goes away.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, a answer, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(data []byte) bool {
		if r.Context().Err() != nil {
			return false
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	chunk := func(choices []wireChunkChoice, usage *wireUsage) bool {
		b, err := json.Marshal(wireChunk{
			ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model,
			Choices: choices, Usage: usage,
		})
		if err != nil {
			s.t.Errorf("llmtest: encoding chunk: %v", err)
			return false
		}
		return send(b)
	}
	delta := func(d wireDelta) bool {
		return chunk([]wireChunkChoice{{Delta: d}}, nil)
	}

	if a.step.EmptyChoices {
		if !chunk([]wireChunkChoice{}, nil) {
			return
		}
	} else {
		if !delta(wireDelta{Role: openai.ChatMessageRoleAssistant}) {
			return
		}
		for _, piece := range splitWords(a.step.Content) {
			if !delta(wireDelta{Content: piece}) {
				return
			}
		}
		for i, tc := range a.step.ToolCalls {
			empty := ""
			first := wireToolCall{Index: &i, ID: tc.ID, Type: "function",
				Function: wireFunction{Name: tc.Name, Arguments: &empty}}
			if !delta(wireDelta{ToolCalls: []wireToolCall{first}}) {
				return
			}
			for _, frag := range splitN(tc.Arguments, 3) {
				if !delta(wireDelta{ToolCalls: []wireToolCall{{Index: &i, Function: wireFunction{Arguments: &frag}}}}) {
					return
				}
			}
		}
		fr := a.finishReason()
		if !chunk([]wireChunkChoice{{Delta: wireDelta{}, FinishReason: &fr}}, nil) {
			return
		}
	}
	if includeUsage {
		u := a.usage
		if !chunk([]wireChunkChoice{}, &u) {
			return
		}
	}
	send([]byte("[DONE]"))
}

// writeError writes an OpenAI-style JSON error.
func writeError(w http.ResponseWriter, status int, msg string) {
	typ, code := "invalid_request_error", any(nil)
	switch {
	case status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code},
	})
}

// usageFor fills in the step's usage, estimating missing counts.
func usageFor(st Step, req openai.ChatCompletionRequest) wireUsage {
	estimate := func(n int) int { return max(1, n/4) }
	p, c := st.PromptTokens, st.CompletionTokens
	if p == 0 {
		n := 0
		for _, m := range req.Messages {
			n += len(m.Content) + len(m.Role)
			for _, part := range m.MultiContent {
				n += len(part.Text)
			}
			for _, tc := range m.ToolCalls {
				n += len(tc.Function.Name) + len(tc.Function.Arguments)
			}
		}
		p = estimate(n)
	}
	if c == 0 {
		n := len(st.Content)
		for _, tc := range st.ToolCalls {
			n += len(tc.Name) + len(tc.Arguments)
		}
		c = estimate(n)
	}
	return wireUsage{PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
}

// splitWords splits s into pieces that concatenate back to s: one per word
// (each keeping its trailing space), or two halves for a single word.
func splitWords(s string) []string {
	if s == "" {
		return nil
	}
	var pieces []string
	start := 0
	for i, r := range s {
		if (r == ' ' || r == '\n' || r == '\t') && i+1 < len(s) {
			pieces = append(pieces, s[start:i+1])
			start = i + 1
		}
	}
	pieces = append(pieces, s[start:])
	if len(pieces) == 1 {
		return splitN(s, 2)
	}
	return pieces
}

// splitN splits s into at most n non-empty pieces on rune boundaries that
// concatenate back to s (2 or more whenever s has 2 or more runes).
func splitN(s string, n int) []string {
	runes := utf8.RuneCountInString(s)
	if runes == 0 {
		return nil
	}
	n = min(n, runes)
	var pieces []string
	start, count, want := 0, 0, 1
	for i := range s {
		if count == want*runes/n && count > 0 {
			pieces = append(pieces, s[start:i])
			start = i
			want++
		}
		count++
	}
	return append(pieces, s[start:])
}
