package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/wardenrt/warden/runtime/decode"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/runtime/tool"
)

// Message is one message of a conversation, in the OpenAI wire format
// (what transcripts record and replays read back).
type Message = openai.ChatCompletionMessage

// ModelRequest is one chat completion the loop asks for.
type ModelRequest struct {
	Messages []Message
	Tools    []openai.Tool
}

// ModelResponse is a model's answer: one assistant message.
type ModelResponse struct {
	Message      Message `json:"message"`
	FinishReason string  `json:"finish_reason"`
	Usage        Usage   `json:"usage"`
	// Attempts is how many requests it took (retries included).
	Attempts int `json:"attempts"`
}

// Usage counts tokens.
type Usage struct {
	Prompt     int `json:"prompt_tokens"`
	Completion int `json:"completion_tokens"`
	Total      int `json:"total_tokens"`
}

func (u *Usage) add(v Usage) {
	u.Prompt += v.Prompt
	u.Completion += v.Completion
	u.Total += v.Total
}

// Model answers chat completions. onText, when not nil, receives the
// assistant's text as it arrives (streaming); the response holds all of it.
type Model interface {
	Complete(ctx context.Context, req ModelRequest, onText func(string)) (ModelResponse, error)
}

// ErrContextOverflow is wrapped by a Model's error when the conversation
// no longer fits the model's context window; the loop trims old tool
// outputs and asks again.
var ErrContextOverflow = errors.New("the conversation exceeds the model's context window")

// OpenAIConfig configures [NewOpenAI]. BaseURL and Model are required.
type OpenAIConfig struct {
	// BaseURL is the API root including its version
	// ("https://api.openai.com/v1", "http://127.0.0.1:11434/v1").
	BaseURL string
	APIKey  string
	Model   string
	// Stream asks for server-sent events, so text arrives as it is made.
	Stream bool
	// MaxTokens caps each completion (0: the server's default).
	MaxTokens int
	// Retries bounds the retries of one completion after a 429, a 5xx,
	// a timeout, a dropped connection or an empty answer (default 4).
	Retries int
	// BaseDelay and MaxDelay shape the backoff: attempt n waits a random
	// time in [0, min(MaxDelay, BaseDelay·2ⁿ)] (full jitter), or what
	// Retry-After says, up to MaxDelay (defaults 500 ms and 30 s).
	BaseDelay, MaxDelay time.Duration
	// AttemptTimeout bounds one request (default 120 s).
	AttemptTimeout time.Duration
	// HTTPClient sends the requests (default: a client with no proxy from
	// the environment and no redirects).
	HTTPClient *http.Client
	// MaxResponseBytes bounds one answer, a whole stream for a streamed
	// one (default DefaultMaxResponseBytes).
	MaxResponseBytes int64
}

// OpenAI is a [Model] on an OpenAI-compatible endpoint, through go-openai.
type OpenAI struct {
	cfg    OpenAIConfig
	client *openai.Client
}

// NewOpenAI checks cfg and returns the model.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, tool.Errorf(tool.CodeLLMError, "set OPENAI_BASE_URL to an http(s) URL such as https://api.openai.com/v1 (no credentials in it)",
			"the model endpoint %q is not a valid http(s) URL", redact.String(cfg.BaseURL))
	}
	if cfg.Model == "" {
		return nil, tool.Errorf(tool.CodeLLMError, "name a model with --model or WARDEN_MODEL", "no model named")
	}
	if cfg.Retries == 0 {
		cfg.Retries = 4
	}
	if cfg.BaseDelay == 0 {
		cfg.BaseDelay = 500 * time.Millisecond
	}
	if cfg.MaxDelay == 0 {
		cfg.MaxDelay = 30 * time.Second
	}
	if cfg.AttemptTimeout == 0 {
		cfg.AttemptTimeout = 120 * time.Second
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		hc = &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	oc.HTTPClient = retryAfterDoer{hc, cfg.MaxResponseBytes}
	return &OpenAI{cfg: cfg, client: openai.NewClientWithConfig(oc)}, nil
}

// Host is the endpoint's host (what a run records; never the key).
func (m *OpenAI) Host() string {
	u, _ := url.Parse(m.cfg.BaseURL)
	return u.Host
}

// Name is the model's name.
func (m *OpenAI) Name() string { return m.cfg.Model }

// retryAfterKey carries a *string that receives the Retry-After header of
// the attempt's response (go-openai's errors do not expose headers).
type retryAfterKey struct{}

// It also bounds what is read of each answer: go-openai reads a body to
// its end.
type retryAfterDoer struct {
	next *http.Client
	max  int64
}

func (d retryAfterDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.next.Do(req)
	if resp != nil {
		if p, ok := req.Context().Value(retryAfterKey{}).(*string); ok {
			*p = resp.Header.Get("Retry-After")
		}
		if resp.Body != nil {
			resp.Body = decode.LimitBody(resp.Body, "the model endpoint's answer", d.max)
		}
	}
	return resp, err
}

// DefaultMaxResponseBytes bounds one answer of the model endpoint.
const DefaultMaxResponseBytes = 32 << 20

// Complete asks for one completion, retrying what is worth retrying.
func (m *OpenAI) Complete(ctx context.Context, req ModelRequest, onText func(string)) (ModelResponse, error) {
	creq := openai.ChatCompletionRequest{
		Model:     m.cfg.Model,
		Messages:  req.Messages,
		Tools:     req.Tools,
		MaxTokens: m.cfg.MaxTokens,
	}
	for attempt := 0; ; attempt++ {
		var retryAfter string
		var resp ModelResponse
		var err error
		var actx context.Context
		var cancel context.CancelFunc
		if m.cfg.Stream {
			// A long answer streams for as long as it takes: the attempt
			// timeout bounds the wait for each chunk (idle), not the whole.
			var idle *time.Timer
			actx, cancel = context.WithCancel(context.WithValue(ctx, retryAfterKey{}, &retryAfter))
			var timedOut atomic.Bool
			idle = time.AfterFunc(m.cfg.AttemptTimeout, func() { timedOut.Store(true); cancel() })
			streamed := false
			resp, err = m.stream(actx, creq, func() { idle.Reset(m.cfg.AttemptTimeout) }, func(s string) {
				streamed = true
				if onText != nil {
					onText(s)
				}
			})
			idle.Stop()
			if err != nil && timedOut.Load() {
				err = errAttemptTimeout
			}
			if err != nil && streamed && onText != nil && ctx.Err() == nil {
				// What was shown is not the answer: say so before the retry
				// shows it again.
				onText("\n[the answer was interrupted; asking again]\n")
			}
		} else {
			actx, cancel = context.WithTimeout(context.WithValue(ctx, retryAfterKey{}, &retryAfter), m.cfg.AttemptTimeout)
			resp, err = m.once(actx, creq)
			if err == nil && onText != nil && resp.Message.Content != "" {
				onText(resp.Message.Content) // all of it, at once
			}
		}
		timedOut := errors.Is(actx.Err(), context.DeadlineExceeded) || errors.Is(err, errAttemptTimeout)
		cancel()
		if err == nil {
			resp.Attempts = attempt + 1
			return resp, nil
		}
		if ctx.Err() != nil {
			return ModelResponse{}, ctx.Err()
		}
		retry, wait, lerr := m.classify(err, timedOut, retryAfter)
		if !retry || attempt >= m.cfg.Retries {
			if retry {
				return ModelResponse{}, tool.Errorf(tool.CodeLLMError, "try again later, or check the endpoint",
					"the model endpoint failed %d times: %s", attempt+1, lerr.Error())
			}
			return ModelResponse{}, lerr
		}
		if wait == 0 {
			wait = m.backoff(attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ModelResponse{}, ctx.Err()
		case <-t.C:
		}
	}
}

// backoff is full jitter: a random wait in [0, min(MaxDelay, BaseDelay·2ⁿ)].
func (m *OpenAI) backoff(attempt int) time.Duration {
	ceil := m.cfg.BaseDelay << min(attempt, 20)
	if ceil <= 0 || ceil > m.cfg.MaxDelay {
		ceil = m.cfg.MaxDelay
	}
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

// errEmptyChoices marks an answer with no choices (retried).
var errEmptyChoices = errors.New("the endpoint answered with no choices")

// errAttemptTimeout marks a stream that stopped sending (retried).
var errAttemptTimeout = errors.New("the stream stopped")

// classify says whether err is worth another attempt, how long Retry-After
// asks to wait (0: use the backoff), and the error to report.
func (m *OpenAI) classify(err error, timedOut bool, retryAfter string) (retry bool, wait time.Duration, out error) {
	wait = parseRetryAfter(retryAfter, time.Now())
	if wait > m.cfg.MaxDelay {
		wait = m.cfg.MaxDelay
	}
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	var rerr *tool.Error
	switch {
	case errors.As(err, &rerr):
		return false, 0, rerr
	case errors.Is(err, errEmptyChoices):
		return true, 0, tool.Errorf(tool.CodeLLMError, "", "%v", err)
	case timedOut:
		return true, 0, tool.Errorf(tool.CodeLLMError, "check the endpoint: a model that needs longer needs a larger attempt timeout",
			"the model sent nothing for %s", m.cfg.AttemptTimeout)
	case errors.As(err, &apiErr):
		return m.byStatus(apiErr.HTTPStatusCode, apiErr.Message, fmt.Sprint(apiErr.Code)+" "+apiErr.Type, wait)
	case errors.As(err, &reqErr):
		msg := strings.TrimSpace(string(reqErr.Body))
		if reqErr.Err != nil && msg == "" {
			msg = reqErr.Err.Error()
		}
		return m.byStatus(reqErr.HTTPStatusCode, firstLine(msg, 200), "", wait)
	}
	var nerr net.Error
	var opErr *net.OpError
	if errors.As(err, &nerr) || errors.As(err, &opErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true, 0, tool.Errorf(tool.CodeLLMError, "check that the endpoint is up (OPENAI_BASE_URL)",
			"the model endpoint could not be reached: %s", redact.String(err.Error()))
	}
	// Anything else: a body that is not the protocol (HTML from a proxy,
	// a wrong base URL), not worth retrying.
	return false, 0, tool.Errorf(tool.CodeLLMError, "check OPENAI_BASE_URL: it must be an OpenAI-compatible API root ending in its version, e.g. /v1",
		"the model endpoint's answer is not an OpenAI chat completion: %s", firstLine(redact.String(err.Error()), 200))
}

func (m *OpenAI) byStatus(status int, msg, code string, wait time.Duration) (bool, time.Duration, error) {
	msg = redact.String(msg)
	switch {
	case status == http.StatusTooManyRequests:
		return true, wait, tool.Errorf(tool.CodeLLMError, "wait, or raise the endpoint's rate limit", "rate limited (429): %s", msg)
	case status >= 500:
		return true, wait, tool.Errorf(tool.CodeLLMError, "try again later", "the model endpoint failed (%d): %s", status, msg)
	case isOverflow(status, msg, code):
		return false, 0, fmt.Errorf("%w: %s", ErrContextOverflow, msg)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return false, 0, tool.Errorf(tool.CodeLLMError, "check OPENAI_API_KEY", "the model endpoint refused the key (%d): %s", status, msg)
	case status == http.StatusNotFound:
		return false, 0, tool.Errorf(tool.CodeLLMError, "check OPENAI_BASE_URL and --model", "not found (404): %s", msg)
	}
	return false, 0, tool.Errorf(tool.CodeLLMError, "", "the model endpoint refused the request (%d): %s", status, msg)
}

// isOverflow recognises a context-window overflow: OpenAI's code, or the
// messages of OpenAI-compatible servers (vLLM, llama.cpp, Ollama).
func isOverflow(status int, msg, code string) bool {
	// OpenAI's code; llama.cpp's error type.
	if strings.Contains(code, "context_length_exceeded") || strings.Contains(code, "exceed_context_size") {
		return true
	}
	if status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge {
		return false
	}
	l := strings.ToLower(msg)
	for _, s := range []string{"context length", "context window", "maximum context", "too many tokens", "exceeds the context",
		"context_length", "context size"} {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// parseRetryAfter reads Retry-After: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n >= 0 {
		if n > 24*3600 { // "inf", "1e300": a day is plenty (the caller caps it further)
			n = 24 * 3600
		}
		return time.Duration(n * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func (m *OpenAI) once(ctx context.Context, req openai.ChatCompletionRequest) (ModelResponse, error) {
	resp, err := m.client.CreateChatCompletion(ctx, req)
	if err != nil {
		return ModelResponse{}, err
	}
	if len(resp.Choices) == 0 {
		return ModelResponse{}, errEmptyChoices
	}
	c := resp.Choices[0]
	c.Message.Role = openai.ChatMessageRoleAssistant
	return ModelResponse{
		Message:      c.Message,
		FinishReason: string(c.FinishReason),
		Usage:        Usage{resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.TotalTokens},
	}, nil
}

// stream asks for a streamed answer; alive is called at each chunk.
func (m *OpenAI) stream(ctx context.Context, req openai.ChatCompletionRequest, alive func(), onText func(string)) (ModelResponse, error) {
	req.Stream = true
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	s, err := m.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return ModelResponse{}, err
	}
	defer s.Close()
	var text strings.Builder
	var calls toolCallAssembler
	var out ModelResponse
	sawChoice := false
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return ModelResponse{}, err
		}
		alive()
		if chunk.Usage != nil {
			out.Usage = Usage{chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens, chunk.Usage.TotalTokens}
		}
		if len(chunk.Choices) == 0 {
			continue
		}
		sawChoice = true
		c := chunk.Choices[0]
		if c.Delta.Content != "" {
			text.WriteString(c.Delta.Content)
			onText(c.Delta.Content)
		}
		for _, d := range c.Delta.ToolCalls {
			calls.add(d)
		}
		if c.FinishReason != "" {
			out.FinishReason = string(c.FinishReason)
		}
	}
	if !sawChoice {
		return ModelResponse{}, errEmptyChoices
	}
	out.Message = Message{Role: openai.ChatMessageRoleAssistant, Content: text.String(), ToolCalls: calls.calls()}
	return out, nil
}

// toolCallAssembler puts streamed tool-call fragments together. Servers
// differ: OpenAI sends an index with every fragment and the id and name in
// the first; some (Ollama) send each whole call with index 0; some send
// argument fragments without an index. A fragment with a new id, or a
// name for a call that has one, starts a new call; one without an index
// or id continues the last call.
type toolCallAssembler struct {
	list    []*openai.ToolCall
	byIndex map[int]*openai.ToolCall
}

func (a *toolCallAssembler) add(d openai.ToolCall) {
	var tc *openai.ToolCall
	switch {
	case d.Index != nil:
		tc = a.byIndex[*d.Index]
		if tc != nil && ((d.ID != "" && tc.ID != "" && d.ID != tc.ID) || (d.Function.Name != "" && tc.Function.Name != "")) {
			tc = nil // the index is reused for another call
		}
	case d.ID == "" && len(a.list) > 0:
		tc = a.list[len(a.list)-1]
	}
	if tc == nil {
		tc = &openai.ToolCall{Type: openai.ToolTypeFunction}
		a.list = append(a.list, tc)
		if d.Index != nil {
			if a.byIndex == nil {
				a.byIndex = map[int]*openai.ToolCall{}
			}
			a.byIndex[*d.Index] = tc
		}
	}
	if d.ID != "" {
		tc.ID = d.ID
	}
	tc.Function.Name += d.Function.Name
	tc.Function.Arguments += d.Function.Arguments
}

func (a *toolCallAssembler) calls() []openai.ToolCall {
	var out []openai.ToolCall
	for _, tc := range a.list {
		out = append(out, *tc)
	}
	return out
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
