package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

const searchTestKey = "BSAtestkey-0123456789abcdef"

// searchWaits records the waits a search asked for instead of sleeping.
type searchWaits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *searchWaits) wait(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.d = append(w.d, d)
	return ctx.Err()
}

func (w *searchWaits) list() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

var searchTestNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func searchNewTool(cfg SearchConfig, w *searchWaits) tool.Tool {
	return tool.Adapt[searchArgs](searchTestTool(cfg, w))
}

// searchTestTool is the search tool with the test DNS, waits and clock,
// before it is adapted (tests that change its seams).
func searchTestTool(cfg SearchConfig, w *searchWaits) *SearchTool {
	return &SearchTool{Config: cfg, net: httpSeams{resolve: httpNewResolver(httpTestNames()).resolve},
		wait: w.wait, now: func() time.Time { return searchTestNow }}
}

// searchSearXNGServer speaks SearXNG's JSON API; status, when set, answers
// the first len(status) requests with those codes (Retry-After: ra).
func searchSearXNGServer(t *testing.T, status []int, ra string) *httpTestServer {
	t.Helper()
	var mu sync.Mutex
	n := 0
	return httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		if i < len(status) {
			if ra != "" {
				w.Header().Set("Retry-After", ra)
			}
			http.Error(w, "slow down", status[i])
			return
		}
		if r.URL.Path != "/searx/search" || r.URL.Query().Get("format") != "json" || r.URL.Query().Get("q") == "" {
			http.Error(w, "bad request "+r.URL.String(), http.StatusBadRequest)
			return
		}
		q := r.URL.Query().Get("q")
		var results []map[string]string
		for k := 1; k <= 7; k++ {
			results = append(results, map[string]string{
				"title": fmt.Sprintf("Result %d for %s", k, q), "url": fmt.Sprintf("https://example.org/%d", k),
				"content": fmt.Sprintf("snippet &amp; <b>%d</b>", k), "engine": "duckduckgo",
			})
		}
		results = append(results[:1], append([]map[string]string{{"title": "no url"}}, results[1:]...)...)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"query": q, "number_of_results": 7, "results": results})
	})
}

func searchBraveServer(t *testing.T) *httpTestServer {
	t.Helper()
	return httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Subscription-Token") != searchTestKey {
			http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/res/v1/web/search" || r.URL.Query().Get("count") == "" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"type":"search","query":{"original":%q},"web":{"type":"search","results":[
			{"title":"The <strong>Go</strong> Programming Language","url":"https://go.dev/","description":"<strong>Go</strong> is an open source language"},
			{"title":"Go (game)","url":"https://en.wikipedia.org/wiki/Go_(game)","description":"A board game","extra_snippets":["x"]}]}}`,
			r.URL.Query().Get("q"))
	})
}

func searchData(t *testing.T, res tool.Result) SearchData {
	t.Helper()
	if !res.Success {
		t.Fatalf("search failed: %+v", res.Error)
	}
	var d SearchData
	if err := json.Unmarshal(res.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSearchSearXNG(t *testing.T) {
	srv := searchSearXNGServer(t, nil, "")
	w := &searchWaits{}
	tool := searchNewTool(SearchConfig{SearXNGURL: srv.at("searx.test", "/searx/")}, w)
	g, _ := httpGate(t, tool, "net:searx.test", fmt.Sprintf("net:127.0.0.1:%d", srv.port))
	for _, tc := range []struct {
		args string
		n    int
	}{{`{"query":"golang"}`, 5}, {`{"query":"golang","num_results":3}`, 3}, {`{"query":"golang","num_results":20}`, 7}} {
		res := tooltest.Call(t, g, "search", tc.args)
		d := searchData(t, res)
		if d.Backend != "searxng" || d.Query != "golang" || len(d.Results) != tc.n {
			t.Fatalf("%s: %+v", tc.args, d)
		}
		if r := d.Results[1]; r.Title != "Result 2 for golang" || r.URL != "https://example.org/2" || r.Snippet != "snippet & 2" {
			t.Fatalf("%+v", r)
		}
		if !strings.Contains(res.Output, "1. Result 1 for golang\n   https://example.org/1\n   snippet & 1") {
			t.Fatalf("output %q", res.Output)
		}
	}
	if len(w.list()) != 0 {
		t.Fatalf("waited %v", w.list())
	}
}

func TestSearchBrave(t *testing.T) {
	srv := searchBraveServer(t)
	toolName := searchNewTool(SearchConfig{Backend: "brave", BraveAPIKey: searchTestKey, BraveURL: srv.at("brave.test", "/res/v1/web/search")}, &searchWaits{})
	g, audit := httpGate(t, toolName, "net:brave.test", fmt.Sprintf("net:127.0.0.1:%d", srv.port))
	res := tooltest.Call(t, g, "search", `{"query":"go language","num_results":1}`)
	d := searchData(t, res)
	if d.Backend != "brave" || len(d.Results) != 1 {
		t.Fatalf("%+v", d)
	}
	if r := d.Results[0]; r.Title != "The Go Programming Language" || r.URL != "https://go.dev/" || r.Snippet != "Go is an open source language" {
		t.Fatalf("%+v", r)
	}
	tooltest.AssertNoSecret(t, res, audit, searchTestKey)

	// A wrong key is a configuration error with a hint naming the variable.
	bad := searchNewTool(SearchConfig{Backend: "brave", BraveAPIKey: "wrong-key-value", BraveURL: srv.at("brave.test", "/res/v1/web/search")}, &searchWaits{})
	g2, _ := httpGate(t, bad, "net:brave.test", fmt.Sprintf("net:127.0.0.1:%d", srv.port))
	httpWantError(t, tooltest.Call(t, g2, "search", `{"query":"x"}`), tool.CodeToolError, "401", "BRAVE_API_KEY")
}

func TestSearchBraveDefaultEndpointNeed(t *testing.T) {
	toolName := tool.Adapt[searchArgs](&SearchTool{Config: SearchConfig{BraveAPIKey: searchTestKey}})
	g, _ := httpGate(t, toolName)
	res := tooltest.CallReq(t, g, gate.Request{Tool: "search", Args: json.RawMessage(`{"query":"x"}`), DryRun: true})
	httpWantError(t, res, tool.CodeCapabilityDenied, "net:api.search.brave.com:443", "needs the grant net:api.search.brave.com:443")
}

func TestSearchRateLimit(t *testing.T) {
	future := searchTestNow.Add(3 * time.Second).Format(http.TimeFormat)
	cases := []struct {
		name      string
		status    []int
		ra        string
		code      tool.Code
		msg       string
		waits     []time.Duration
		hits      int64
		warnRetry bool
	}{
		{"429 then success (seconds)", []int{429}, "2", "", "", []time.Duration{2 * time.Second}, 2, true},
		{"429 twice then success (date)", []int{429, 429}, future, "", "", []time.Duration{3 * time.Second, 3 * time.Second}, 3, true},
		{"429 without Retry-After backs off", []int{429, 429}, "", "", "", []time.Duration{time.Second, 2 * time.Second}, 3, true},
		{"429 with a past date retries at once", []int{429}, "Wed, 21 Oct 2015 07:28:00 GMT", "", "", []time.Duration{0}, 2, true},
		{"repeated 429", []int{429, 429, 429, 429, 429}, "0", tool.CodeNetworkError, "rate limited by searxng: HTTP 429 after 3 retries", []time.Duration{0, 0, 0}, 4, false},
		{"Retry-After too long", []int{429}, "3600", tool.CodeNetworkError, "asking to wait 1h0m0s", nil, 1, false},
		{"total wait capped", []int{429, 429, 429}, "8", tool.CodeNetworkError, "longer than warden waits", []time.Duration{8 * time.Second, 8 * time.Second}, 3, false},
		{"server error", []int{502}, "", tool.CodeNetworkError, "searxng answered 502 Bad Gateway", nil, 1, false},
		{"json format disabled", []int{403}, "", tool.CodeToolError, "refused the search: 403", nil, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := searchSearXNGServer(t, tc.status, tc.ra)
			w := &searchWaits{}
			g, _ := httpGate(t, searchNewTool(SearchConfig{Backend: "searxng", SearXNGURL: srv.at("searx.test", "/searx")}, w),
				"net:searx.test", fmt.Sprintf("net:127.0.0.1:%d", srv.port))
			res := tooltest.Call(t, g, "search", `{"query":"q"}`)
			if tc.code == "" {
				d := searchData(t, res)
				if len(d.Results) != 5 || !strings.Contains(strings.Join(res.Warnings, "|"), "rate limited") != !tc.warnRetry {
					t.Fatalf("%+v %v", d, res.Warnings)
				}
			} else {
				httpWantError(t, res, tc.code, tc.msg, "")
			}
			if got := w.list(); fmt.Sprint(got) != fmt.Sprint(tc.waits) {
				t.Fatalf("waits %v, want %v", got, tc.waits)
			}
			if srv.hits.Load() != tc.hits {
				t.Fatalf("hits %d, want %d", srv.hits.Load(), tc.hits)
			}
		})
	}
}

func TestSearchErrors(t *testing.T) {
	malformed := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"results": [`)
	})
	htmlPage := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "<html><body>SearXNG</body></html>")
	})
	noResults := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"answers": []}`)
	})
	braveEmpty := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"type":"search","query":{"original":"x"}}`)
	})
	grants := []string{"net:searx.test", "net:brave.test", "net:127.0.0.1"}
	gateFor := func(cfg SearchConfig) *gate.Gate {
		g, _ := httpGate(t, searchNewTool(cfg, &searchWaits{}), grants...)
		return g
	}
	cases := []struct {
		name          string
		cfg           SearchConfig
		grants        []string
		args          string
		code          tool.Code
		msgHas, hintH string
	}{
		{"no backend", SearchConfig{}, nil, `{"query":"x"}`, tool.CodeOperationNotSupported, "no search backend is configured", "WARDEN_SEARCH_BACKEND=searxng and WARDEN_SEARXNG_URL="},
		{"searxng without URL", SearchConfig{Backend: "searxng"}, nil, `{"query":"x"}`, tool.CodeOperationNotSupported, "needs WARDEN_SEARXNG_URL", "BRAVE_API_KEY"},
		{"brave without key", SearchConfig{Backend: "Brave"}, nil, `{"query":"x"}`, tool.CodeOperationNotSupported, "needs BRAVE_API_KEY", "WARDEN_SEARCH_BACKEND=brave"},
		{"unknown backend", SearchConfig{Backend: "google"}, nil, `{"query":"x"}`, tool.CodeOperationNotSupported, `unknown search backend "google"`, ""},
		{"bad searxng URL", SearchConfig{SearXNGURL: "searx.example.org"}, nil, `{"query":"x"}`, tool.CodeOperationNotSupported, "WARDEN_SEARXNG_URL", ""},
		{"searxng URL with user info", SearchConfig{SearXNGURL: "https://u:p@searx.test/"}, nil, `{"query":"x"}`, tool.CodeOperationNotSupported, "user info", ""},
		{"empty query", SearchConfig{SearXNGURL: malformed.at("searx.test", "/")}, nil, `{"query":"   "}`, tool.CodeInvalidInput, "query is empty", ""},
		{"too many results", SearchConfig{SearXNGURL: malformed.at("searx.test", "/")}, nil, `{"query":"x","num_results":21}`, tool.CodeInvalidInput, "num_results", ""},
		{"malformed JSON", SearchConfig{SearXNGURL: malformed.at("searx.test", "/")}, nil, `{"query":"x"}`, tool.CodeToolError, "not its JSON API", "JSON format"},
		{"HTML instead of JSON", SearchConfig{SearXNGURL: htmlPage.at("searx.test", "/")}, nil, `{"query":"x"}`, tool.CodeToolError, "not its JSON API", ""},
		{"JSON without results", SearchConfig{SearXNGURL: noResults.at("searx.test", "/")}, nil, `{"query":"x"}`, tool.CodeToolError, "without results", ""},
		{"no grant for the backend", SearchConfig{SearXNGURL: "https://searx.example.org"}, nil, `{"query":"x"}`, tool.CodeCapabilityDenied, "net:searx.example.org:443", "needs the grant net:searx.example.org:443"},
		{"backend on loopback without an address grant", SearchConfig{SearXNGURL: noResults.at("searx.test", "/")}, []string{"net:searx.test"}, `{"query":"x"}`, tool.CodeCapabilityDenied, "resolved to 127.0.0.1 (loopback)", "needs the grant net:127.0.0.1:"},
		{"backend unreachable", SearchConfig{SearXNGURL: "http://nowhere.test/"}, []string{"net:nowhere.test"}, `{"query":"x"}`, tool.CodeNetworkError, "cannot resolve nowhere.test", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := gateFor(tc.cfg)
			if tc.grants != nil {
				g, _ = httpGate(t, searchNewTool(tc.cfg, &searchWaits{}), tc.grants...)
			}
			httpWantError(t, tooltest.Call(t, g, "search", tc.args), tc.code, tc.msgHas, tc.hintH)
		})
	}
	// Brave answering without a web section (e.g. only news) has no results.
	g := gateFor(SearchConfig{BraveAPIKey: searchTestKey, BraveURL: braveEmpty.at("brave.test", "/")})
	if d := searchData(t, tooltest.Call(t, g, "search", `{"query":"x"}`)); len(d.Results) != 0 || d.Results == nil {
		t.Fatalf("%+v", d)
	}
}

func TestSearchFollowsRedirectsOnlyToGrantedHosts(t *testing.T) {
	target := searchSearXNGServer(t, nil, "")
	origin := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.at("evil.test", "/searx/search?"+r.URL.RawQuery), http.StatusFound)
	})
	g, _ := httpGate(t, searchNewTool(SearchConfig{SearXNGURL: origin.at("searx.test", "/")}, &searchWaits{}), "net:searx.test", "net:127.0.0.1")
	httpWantError(t, tooltest.Call(t, g, "search", `{"query":"x"}`), tool.CodeCapabilityDenied, "redirect to evil.test refused", "needs the grant net:evil.test:")
	if target.hits.Load() != 0 {
		t.Fatalf("the ungranted host got %d requests", target.hits.Load())
	}
}

func TestSearchDryRun(t *testing.T) {
	srv := searchBraveServer(t)
	ws := t.TempDir()
	tool := searchNewTool(SearchConfig{BraveAPIKey: searchTestKey, BraveURL: srv.at("brave.test", "/res/v1/web/search")}, &searchWaits{})
	g, audit := tooltest.Gate(t, httpPolicy("net:brave.test", "net:127.0.0.1"), ws, tool)
	before := tooltest.TreeChecksum(t, ws)
	res := tooltest.CallReq(t, g, gate.Request{Tool: "search", DryRun: true, Principal: []string{"test"}, Args: json.RawMessage(`{"query":"go lang","num_results":4}`)})
	if !res.Success || !res.DryRun {
		t.Fatalf("%+v", res)
	}
	want := "GET " + srv.at("brave.test", "/res/v1/web/search?count=4&q=go+lang")
	if !strings.Contains(res.Output, want) || !strings.Contains(res.Output, "would search brave") || !strings.Contains(res.Output, "nothing was sent") {
		t.Fatalf("preview %q lacks %q", res.Output, want)
	}
	if srv.hits.Load() != 0 || tooltest.TreeChecksum(t, ws) != before {
		t.Fatalf("dry run sent %d requests or changed the workspace", srv.hits.Load())
	}
	tooltest.AssertNoSecret(t, res, audit, searchTestKey)
}

func TestSearchRedactsSecrets(t *testing.T) {
	const secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	srv := searchSearXNGServer(t, nil, "")
	g, audit := httpGate(t, searchNewTool(SearchConfig{SearXNGURL: srv.at("searx.test", "/searx")}, &searchWaits{}), "net:searx.test", "net:127.0.0.1")
	// The mock echoes the query in every title, as a search engine might.
	res := tooltest.Call(t, g, "search", `{"query":"token `+secret+`"}`)
	if d := searchData(t, res); len(d.Results) != 5 {
		t.Fatalf("%+v", d)
	}
	tooltest.AssertNoSecret(t, res, audit, secret)
	dry := tooltest.CallReq(t, g, gate.Request{Tool: "search", DryRun: true, Args: json.RawMessage(`{"query":"` + secret + `"}`)})
	tooltest.AssertNoSecret(t, dry, audit, secret)
}

func TestSearchConfigFromEnv(t *testing.T) {
	env := map[string]string{"WARDEN_SEARCH_BACKEND": " brave ", "WARDEN_SEARXNG_URL": "https://s.example", "BRAVE_API_KEY": "k"}
	got := SearchConfigFromEnv(func(k string) string { return env[k] })
	if got != (SearchConfig{Backend: "brave", SearXNGURL: "https://s.example", BraveAPIKey: "k"}) {
		t.Fatalf("%+v", got)
	}
	for _, tc := range []struct {
		cfg  SearchConfig
		want string
	}{
		{SearchConfig{SearXNGURL: "https://s.example", BraveAPIKey: "k"}, "searxng"},
		{SearchConfig{BraveAPIKey: "k"}, "brave"},
		{SearchConfig{Backend: "SearXNG", SearXNGURL: "https://s.example"}, "searxng"},
	} {
		b, err := tc.cfg.backend()
		if err != nil || b.name() != tc.want {
			t.Errorf("%+v: %v %v", tc.cfg, b, err)
		}
	}
}

func TestSearchRetryAfter(t *testing.T) {
	now := searchTestNow
	cases := []struct {
		v       string
		attempt int
		want    time.Duration
	}{
		{"0", 0, 0},
		{"5", 0, 5 * time.Second},
		{" 7 ", 2, 7 * time.Second},
		{"-3", 0, 0},
		{"99999999", 0, time.Hour},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 0, 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, 0},
		{"Saturday, 01-Mar-25 12:00:30 GMT", 0, 30 * time.Second}, // RFC 850
		{"", 0, time.Second},
		{"", 2, 4 * time.Second},
		{"soon", 1, 2 * time.Second},
		{"1.5", 0, time.Second},
	}
	for _, tc := range cases {
		if got := searchRetryAfter(tc.v, now, tc.attempt); got != tc.want {
			t.Errorf("searchRetryAfter(%q, %d) = %v, want %v", tc.v, tc.attempt, got, tc.want)
		}
	}
}

func TestSearchWaitIsContextAware(t *testing.T) {
	sc := &searchClient{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sc.sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("sleep on a cancelled context: %v", err)
	}
}

// A backend that does not answer in time — silent, stalling in the body, or
// asking for a wait longer than the call has left — ends the call with
// TIMEOUT, promptly, when the caller's deadline passes.
func TestSearchTimeout(t *testing.T) {
	release := make(chan struct{})
	stall := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}
	silent := httpServe(t, stall)
	halfway := httpServe(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"results": [`)
		w.(http.Flusher).Flush()
		stall(w, r)
	})
	limited := searchSearXNGServer(t, []int{429}, "5")
	t.Cleanup(func() { close(release) }) // before the servers close
	cases := []struct {
		name string
		srv  *httpTestServer
	}{
		{"no answer", silent},
		{"body stalls", halfway},
		{"Retry-After wait", limited},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			toolName := searchTestTool(SearchConfig{SearXNGURL: tc.srv.at("searx.test", "/searx")}, &searchWaits{})
			toolName.wait = nil // really wait, as a context-aware timer
			g, audit := httpGate(t, tool.Adapt[searchArgs](toolName), "net:searx.test", fmt.Sprintf("net:127.0.0.1:%d", tc.srv.port))
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			res, err := g.Call(ctx, gate.Request{Tool: "search", Args: json.RawMessage(`{"query":"q"}`), Principal: []string{"test"}})
			if err != nil {
				t.Fatal(err)
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("the call took %s after a 300ms deadline", el)
			}
			// search has no timeout argument: the hint must not ask for one.
			httpWantError(t, res, tool.CodeTimeout, "searxng gave no complete answer in time", "try again later")
			if strings.Contains(res.Error.Hint, "raise timeout") {
				t.Errorf("hint %q names an argument search does not have", res.Error.Hint)
			}
			if tooltest.Count(audit, `"TIMEOUT"`) == 0 {
				t.Error("the audit log does not record the timeout")
			}
			if tc.srv.hits.Load() != 1 {
				t.Errorf("hits %d, want 1", tc.srv.hits.Load())
			}
		})
	}
}
