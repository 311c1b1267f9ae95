package text

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

func TestTextAnalyzeStats(t *testing.T) {
	cases := []struct {
		name                                string
		text                                string
		words, sentences, paragraphs, lines int
		chars                               int
		top                                 []TermCount
	}{
		{name: "empty", text: "", top: []TermCount{}},
		{name: "one sentence no stop", text: "Warden gates tools", words: 3, sentences: 1, paragraphs: 1, lines: 1, chars: 18,
			top: []TermCount{{"gates", 1}, {"tools", 1}, {"warden", 1}}},
		{name: "sentences and paragraphs",
			text:  "The gate checks grants. The gate audits calls!\n\nIs the gate fast? Yes.\nIt is.\n",
			words: 15, sentences: 5, paragraphs: 2, lines: 4, chars: 78,
			top: []TermCount{{"gate", 3}, {"audits", 1}, {"calls", 1}, {"checks", 1}, {"fast", 1}, {"grants", 1}}},
		{name: "contractions and hyphens", text: "don't re-run well-known tools", words: 4, sentences: 1, paragraphs: 1, lines: 1, chars: 29,
			top: []TermCount{{"re-run", 1}, {"tools", 1}, {"well-known", 1}}},
		{name: "unicode", text: "Çà et là, naïve façade… Ελληνικά κείμενα.", words: 7, sentences: 2, paragraphs: 1, lines: 1, chars: 41,
			top: []TermCount{{"et", 1}, {"façade", 1}, {"là", 1}, {"naïve", 1}, {"çà", 1}, {"ελληνικά", 1}, {"κείμενα", 1}}},
		{name: "numbers are not terms", text: "port 8080 and port 9090", words: 5, sentences: 1, paragraphs: 1, lines: 1, chars: 23,
			top: []TermCount{{"port", 2}}},
		{name: "blank lines only", text: "\n\n  \n", lines: 3, chars: 5, top: []TermCount{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := Analyze(tc.text)
			if st.Words != tc.words || st.Sentences != tc.sentences || st.Paragraphs != tc.paragraphs || st.Lines != tc.lines || st.Characters != tc.chars {
				t.Errorf("got words=%d sentences=%d paragraphs=%d lines=%d chars=%d, want %d %d %d %d %d",
					st.Words, st.Sentences, st.Paragraphs, st.Lines, st.Characters, tc.words, tc.sentences, tc.paragraphs, tc.lines, tc.chars)
			}
			if fmt.Sprint(st.TopTerms) != fmt.Sprint(tc.top) {
				t.Errorf("top terms %v, want %v", st.TopTerms, tc.top)
			}
		})
	}
	// Reading time at 200 words per minute, and top terms capped at 10.
	st := Analyze(strings.Repeat("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu ", 50))
	if st.Words != 600 || st.ReadingTimeMinutes != 3 {
		t.Errorf("600 words: got %d words, %.2f min", st.Words, st.ReadingTimeMinutes)
	}
	if len(st.TopTerms) != 10 || st.UniqueTerms != 12 {
		t.Errorf("top terms %d (unique %d), want 10 (12)", len(st.TopTerms), st.UniqueTerms)
	}
}

func TestTextAnalyzeGate(t *testing.T) {
	ws := t.TempDir()
	// No grants at all: analyze needs none.
	g, audit := tooltest.Gate(t, "version: 1\n", ws, Tools(Config{})...)
	cases := []struct {
		name, args string
		code       tool.Code
		want       string
	}{
		{"happy", `{"text":"Grants gate tools. Tools need grants."}`, "", "6 words, 2 sentences"},
		{"missing text", `{}`, tool.CodeInvalidInput, ""},
		{"unknown field", `{"text":"x","file":"/etc/passwd"}`, tool.CodeInvalidInput, ""},
		{"wrong type", `{"text":42}`, tool.CodeInvalidInput, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := tooltest.Call(t, g, "analyze", tc.args)
			tooltest.Expect(t, res, tc.code)
			if tc.want != "" && !strings.Contains(res.Output, tc.want) {
				t.Errorf("output %q does not contain %q", res.Output, tc.want)
			}
		})
	}
	t.Run("dry run", func(t *testing.T) {
		before := tooltest.TreeChecksum(t, ws)
		res := tooltest.CallReq(t, g, gate.Request{Tool: "analyze", Args: json.RawMessage(`{"text":"a b c"}`), Principal: []string{"test"}, DryRun: true})
		tooltest.Expect(t, res, "")
		if tooltest.TreeChecksum(t, ws) != before {
			t.Error("dry run changed the workspace")
		}
	})
	t.Run("secret in text", func(t *testing.T) {
		res := tooltest.Call(t, g, "analyze", fmt.Sprintf(`{"text":"token %s token"}`, tooltest.Canary))
		tooltest.Expect(t, res, "")
		tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
		// Not even a fragment of it becomes a top term.
		blob, _ := json.Marshal(res)
		if strings.Contains(strings.ToLower(string(blob)), "0123456789abcdefghij") {
			t.Errorf("a fragment of the secret is in the result: %s", blob)
		}
	})
}

// fakeLLM is a local server speaking the OpenAI chat-completions
// protocol: POST /v1/chat/completions, JSON answer with choices and usage.
type fakeLLM struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []chatRequest
	auth   []string
	// status, when non-zero, is returned with an OpenAI error body.
	status int
	// finish is the finish_reason of every answer ("stop" when empty).
	finish string
	// block makes the server wait until the request is abandoned.
	block bool
}

type chatRequest struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	Messages  []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

func (r chatRequest) user() string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

func newTextFakeLLM(t *testing.T) *fakeLLM {
	f := &fakeLLM{t: t}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeLLM) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"no such route","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.bodies = append(f.bodies, req)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	status, finish, block := f.status, f.finish, f.block
	f.mu.Unlock()
	if block {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if status != 0 {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"the model is on fire","type":"server_error","code":"boom"}}`)
		return
	}
	user := req.user()
	answer := "SUMMARY OF THE WHOLE TEXT"
	switch {
	case strings.Contains(user, "This is part "):
		var i, n int
		fmt.Sscanf(user[strings.Index(user, "This is part "):], "This is part %d of %d", &i, &n)
		answer = fmt.Sprintf("SUMMARY-OF-PART-%d", i)
	case strings.Contains(user, "Merge them"):
		answer = "MERGED SUMMARY"
	}
	if finish == "" {
		finish = "stop"
	}
	json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": answer}, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
	})
}

func (f *fakeLLM) requests() []chatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]chatRequest(nil), f.bodies...)
}

func (f *fakeLLM) config() Config {
	return Config{BaseURL: f.srv.URL + "/v1", Model: "local-model"}
}

// longText returns about n bytes of prose in paragraphs.
func longText(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "Paragraph %d explains how the gate checks every grant before a tool runs. It records the call in the audit log.\n\n", i)
	}
	return b.String()
}

func TestTextSummarize(t *testing.T) {
	const policy = "version: 1\ngrants: [llm]\n"
	t.Run("single chunk", func(t *testing.T) {
		f := newTextFakeLLM(t)
		cfg := f.config()
		cfg.APIKey = "sk-test-local-0000"
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(cfg)...)
		res := tooltest.Call(t, g, "summarize", `{"text":"Warden is a gate for tools. Everything goes through it.","max_tokens":100,"style":"one line"}`)
		tooltest.Expect(t, res, "")
		if res.Output != "SUMMARY OF THE WHOLE TEXT" {
			t.Errorf("output %q", res.Output)
		}
		reqs := f.requests()
		if len(reqs) != 1 {
			t.Fatalf("server saw %d requests, want 1", len(reqs))
		}
		if reqs[0].Model != "local-model" || reqs[0].MaxTokens != 100 || !strings.Contains(reqs[0].user(), "Style: one line") ||
			!strings.Contains(reqs[0].user(), "Everything goes through it.") {
			t.Errorf("request %+v", reqs[0])
		}
		if f.auth[0] != "Bearer sk-test-local-0000" {
			t.Errorf("authorization %q", f.auth[0])
		}
		var d Summary
		if err := json.Unmarshal(res.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Chunks != 1 || d.Requests != 1 || d.Usage.TotalTokens != 110 || d.Model != "local-model" || d.Summary != res.Output {
			t.Errorf("data %+v", d)
		}
	})
	t.Run("multi chunk", func(t *testing.T) {
		f := newTextFakeLLM(t)
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(f.config())...)
		text := longText(30000)
		n := len(Chunks(text, chunkChars))
		if n < 3 {
			t.Fatalf("test text gives %d chunks", n)
		}
		args, _ := json.Marshal(map[string]any{"text": text})
		res := tooltest.Call(t, g, "summarize", string(args))
		tooltest.Expect(t, res, "")
		reqs := f.requests()
		if len(reqs) != n+1 {
			t.Fatalf("server saw %d requests, want %d chunks + 1 merge", len(reqs), n)
		}
		var merge *chatRequest
		for i := range reqs {
			if strings.Contains(reqs[i].user(), "Merge them") {
				if merge != nil {
					t.Fatal("two merge requests")
				}
				merge = &reqs[i]
			} else if len(reqs[i].user()) > chunkChars+1000 {
				t.Errorf("chunk request of %d bytes", len(reqs[i].user()))
			}
		}
		if merge == nil {
			t.Fatal("no merge request")
		}
		for i := 1; i <= n; i++ {
			if !strings.Contains(merge.user(), fmt.Sprintf("SUMMARY-OF-PART-%d", i)) {
				t.Errorf("merge request lacks the summary of part %d", i)
			}
		}
		if res.Output != "MERGED SUMMARY" {
			t.Errorf("output %q", res.Output)
		}
		var d Summary
		json.Unmarshal(res.Data, &d)
		if d.Chunks != n || d.Requests != n+1 || d.MergeRounds != 1 || d.Usage.TotalTokens != 110*(n+1) {
			t.Errorf("data %+v", d)
		}
	})
	t.Run("server error", func(t *testing.T) {
		for _, status := range []int{500, 401, 429} {
			f := newTextFakeLLM(t)
			f.status = status
			g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(f.config())...)
			res := tooltest.Call(t, g, "summarize", `{"text":"some text"}`)
			tooltest.Expect(t, res, tool.CodeLLMError)
			if !strings.Contains(res.Error.Message, fmt.Sprint(status)) {
				t.Errorf("%d: message %q", status, res.Error.Message)
			}
		}
	})
	t.Run("server error in one chunk", func(t *testing.T) {
		f := newTextFakeLLM(t)
		f.status = 503
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(f.config())...)
		args, _ := json.Marshal(map[string]any{"text": longText(30000)})
		res := tooltest.Call(t, g, "summarize", string(args))
		tooltest.Expect(t, res, tool.CodeLLMError)
	})
	t.Run("unreachable endpoint", func(t *testing.T) {
		f := newTextFakeLLM(t)
		cfg := f.config()
		f.srv.Close()
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(cfg)...)
		tooltest.Expect(t, tooltest.Call(t, g, "summarize", `{"text":"some text"}`), tool.CodeLLMError)
	})
	t.Run("no model configured", func(t *testing.T) {
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(Config{})...)
		res := tooltest.Call(t, g, "summarize", `{"text":"some text"}`)
		tooltest.Expect(t, res, tool.CodeLLMError)
		for _, v := range []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "WARDEN_MODEL"} {
			if !strings.Contains(res.Error.Hint, v) {
				t.Errorf("hint %q does not mention %s", res.Error.Hint, v)
			}
		}
	})
	t.Run("endpoint without model", func(t *testing.T) {
		f := newTextFakeLLM(t)
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(Config{BaseURL: f.srv.URL + "/v1"})...)
		res := tooltest.Call(t, g, "summarize", `{"text":"some text"}`)
		tooltest.Expect(t, res, tool.CodeLLMError)
		if !strings.Contains(res.Error.Hint, "WARDEN_MODEL") || len(f.requests()) != 0 {
			t.Errorf("hint %q, %d requests", res.Error.Hint, len(f.requests()))
		}
	})
	t.Run("bad endpoint URL", func(t *testing.T) {
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(Config{BaseURL: "file:///etc/passwd", Model: "m"})...)
		tooltest.Expect(t, tooltest.Call(t, g, "summarize", `{"text":"some text"}`), tool.CodeLLMError)
	})
	t.Run("no llm grant", func(t *testing.T) {
		f := newTextFakeLLM(t)
		g, _ := tooltest.Gate(t, "version: 1\ngrants: [\"fs.read:**\"]\n", t.TempDir(), Tools(f.config())...)
		res := tooltest.Call(t, g, "summarize", `{"text":"some text"}`)
		tooltest.Expect(t, res, tool.CodeCapabilityDenied)
		if !slices.Contains(res.Error.Missing, "llm") || len(f.requests()) != 0 {
			t.Errorf("missing %q, %d requests", res.Error.Missing, len(f.requests()))
		}
	})
	t.Run("invalid input", func(t *testing.T) {
		f := newTextFakeLLM(t)
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(f.config())...)
		for _, args := range []string{`{}`, `{"text":"   \n"}`, `{"text":"x","max_tokens":0}`, `{"text":"x","max_tokens":"9"}`,
			`{"text":"x","style":"a\u001b[2Jb"}`, `{"text":"x","url":"http://evil.example"}`} {
			tooltest.Expect(t, tooltest.Call(t, g, "summarize", args), tool.CodeInvalidInput)
		}
		if len(f.requests()) != 0 {
			t.Errorf("server saw %d requests", len(f.requests()))
		}
	})
	t.Run("dry run", func(t *testing.T) {
		f := newTextFakeLLM(t)
		ws := t.TempDir()
		g, _ := tooltest.Gate(t, policy, ws, Tools(f.config())...)
		before := tooltest.TreeChecksum(t, ws)
		args, _ := json.Marshal(map[string]any{"text": longText(20000)})
		res := tooltest.CallReq(t, g, gate.Request{Tool: "summarize", Args: args, Principal: []string{"test"}, DryRun: true})
		tooltest.Expect(t, res, "")
		if !res.DryRun || !strings.Contains(res.Output, "would send") || !strings.Contains(res.Output, "local-model") {
			t.Errorf("preview %q", res.Output)
		}
		if len(f.requests()) != 0 || tooltest.TreeChecksum(t, ws) != before {
			t.Errorf("dry run sent %d requests or changed the workspace", len(f.requests()))
		}
	})
	t.Run("secret redacted before sending", func(t *testing.T) {
		f := newTextFakeLLM(t)
		g, audit := tooltest.Gate(t, policy, t.TempDir(), Tools(f.config())...)
		res := tooltest.Call(t, g, "summarize", fmt.Sprintf(`{"text":"deploy with token %s then restart"}`, tooltest.Canary))
		tooltest.Expect(t, res, "")
		tooltest.AssertNoSecret(t, res, audit, tooltest.Canary)
		for _, r := range f.requests() {
			if strings.Contains(r.user(), tooltest.Canary) {
				t.Error("the model endpoint received the secret")
			}
		}
		if len(res.Warnings) == 0 || !strings.Contains(strings.Join(res.Warnings, " "), "masked") {
			t.Errorf("warnings %v", res.Warnings)
		}
	})
	t.Run("cut at max_tokens", func(t *testing.T) {
		f := newTextFakeLLM(t)
		f.finish = "length"
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(f.config())...)
		res := tooltest.Call(t, g, "summarize", `{"text":"some text","max_tokens":16}`)
		tooltest.Expect(t, res, "")
		if !strings.Contains(strings.Join(res.Warnings, " "), "max_tokens") {
			t.Errorf("warnings %v", res.Warnings)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		f := newTextFakeLLM(t)
		f.block = true
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(f.config())...)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		res, err := g.Call(ctx, gate.Request{Tool: "summarize", Args: json.RawMessage(`{"text":"some text"}`), Principal: []string{"test"}})
		if err != nil {
			t.Fatal(err)
		}
		tooltest.Expect(t, res, tool.CodeTimeout)
	})
	t.Run("redirect to another host refused", func(t *testing.T) {
		other := newTextFakeLLM(t)
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.srv.URL+r.URL.Path, http.StatusTemporaryRedirect)
		}))
		t.Cleanup(redirector.Close)
		g, _ := tooltest.Gate(t, policy, t.TempDir(), Tools(Config{BaseURL: redirector.URL + "/v1", Model: "m", APIKey: "sk-test-local-0000"})...)
		tooltest.Expect(t, tooltest.Call(t, g, "summarize", `{"text":"some text"}`), tool.CodeLLMError)
		if len(other.requests()) != 0 {
			t.Error("the request followed a redirect to another host")
		}
	})
}

func TestTextChunks(t *testing.T) {
	cases := []struct {
		name string
		text string
		size int
	}{
		{"short", "hello", 100},
		{"paragraphs", strings.Repeat("word word word word.\n\n", 100), 100},
		{"one huge paragraph", strings.Repeat("a sentence here. ", 200), 100},
		{"no spaces", strings.Repeat("x", 1000), 64},
		{"multibyte", strings.Repeat("é", 500), 33},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chunks := Chunks(tc.text, tc.size)
			total := 0
			for _, c := range chunks {
				if len(c) > tc.size {
					t.Errorf("chunk of %d bytes > %d", len(c), tc.size)
				}
				if !strings.ContainsRune(c, '\uFFFD') && !utf8Valid(c) {
					t.Errorf("chunk is not valid UTF-8")
				}
				total += len(strings.ReplaceAll(c, "\n", ""))
			}
			if want := len(strings.ReplaceAll(tc.text, "\n", "")); total != want {
				t.Errorf("chunks hold %d non-newline bytes, the text %d", total, want)
			}
		})
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\x00") == s }
