package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wardenrt/warden/internal/lazyre"

	"github.com/wardenrt/warden/runtime/capability"
	"github.com/wardenrt/warden/runtime/tool"
)

// SearchBraveURL is the Brave Search web endpoint.
const SearchBraveURL = "https://api.search.brave.com/res/v1/web/search"

// Limits of the search tool.
const (
	searchDefaultResults = 5
	searchMaxResults     = 20
	// searchMaxRetries is how many times a 429 answer is retried.
	searchMaxRetries = 3
	// searchMaxWait caps one wait asked by Retry-After; searchMaxTotalWait
	// caps all waits of a call. A backend asking for more is not waited for.
	searchMaxWait      = 10 * time.Second
	searchMaxTotalWait = 20 * time.Second
	// searchTimeout bounds a whole call, waits included.
	searchTimeout = 60 * time.Second
	// searchRequestTimeout bounds one request to the backend.
	searchRequestTimeout = 20 * time.Second
	// searchMaxBody caps a backend's answer.
	searchMaxBody = 4 << 20
)

// SearchConfig chooses and configures the search tool's backend.
// cmd/warden fills it from the environment with SearchConfigFromEnv:
//
//	WARDEN_SEARCH_BACKEND  searxng or brave; when empty, searxng if
//	                       WARDEN_SEARXNG_URL is set, else brave if
//	                       BRAVE_API_KEY is set, else none
//	WARDEN_SEARXNG_URL     base URL of a SearXNG instance with the JSON
//	                       format enabled (settings.yml: search.formats
//	                       lists json), e.g. https://searx.example.org
//	BRAVE_API_KEY          a Brave Search API subscription token
//
// The backend's host needs a net grant like any other request:
// net:api.search.brave.com for Brave, net:HOST of WARDEN_SEARXNG_URL for
// SearXNG (and, for an instance on this machine or a private network, a
// grant naming its address, e.g. net:127.0.0.1:8888).
type SearchConfig struct {
	// Backend is "searxng", "brave" or "" (chosen from what is set).
	Backend string
	// SearXNGURL is the SearXNG base URL; requests go to {base}/search.
	SearXNGURL string
	// BraveAPIKey is sent as X-Subscription-Token; it never appears in
	// results, previews or errors.
	BraveAPIKey string
	// BraveURL overrides the Brave endpoint (SearchBraveURL when empty).
	BraveURL string
}

// SearchConfigFromEnv reads SearchConfig from the environment variables
// documented on SearchConfig (pass os.Getenv).
func SearchConfigFromEnv(getenv func(string) string) SearchConfig {
	return SearchConfig{
		Backend:     strings.TrimSpace(getenv("WARDEN_SEARCH_BACKEND")),
		SearXNGURL:  strings.TrimSpace(getenv("WARDEN_SEARXNG_URL")),
		BraveAPIKey: strings.TrimSpace(getenv("BRAVE_API_KEY")),
	}
}

// searchHowTo is the hint of every configuration error.
const searchHowTo = "configure a backend: set WARDEN_SEARCH_BACKEND=searxng and WARDEN_SEARXNG_URL=https://your-searxng " +
	"(JSON format enabled), or WARDEN_SEARCH_BACKEND=brave and BRAVE_API_KEY=<token>; then grant net:<backend host>"

func searchNotConfigured(format string, args ...any) *tool.Error {
	return tool.Errorf(tool.CodeOperationNotSupported, searchHowTo, format, args...)
}

// backend returns the configured backend, or OPERATION_NOT_SUPPORTED with a
// hint saying how to configure one.
func (c SearchConfig) backend() (searchBackend, *tool.Error) {
	name := strings.ToLower(c.Backend)
	if name == "" {
		switch {
		case c.SearXNGURL != "":
			name = "searxng"
		case c.BraveAPIKey != "":
			name = "brave"
		default:
			return nil, searchNotConfigured("no search backend is configured")
		}
	}
	switch name {
	case "searxng":
		if c.SearXNGURL == "" {
			return nil, searchNotConfigured("the searxng backend needs WARDEN_SEARXNG_URL")
		}
		base, err := searchBaseURL(c.SearXNGURL)
		if err != nil {
			return nil, searchNotConfigured("WARDEN_SEARXNG_URL: %v", err)
		}
		return &searchSearXNG{base: base}, nil
	case "brave":
		if c.BraveAPIKey == "" {
			return nil, searchNotConfigured("the brave backend needs BRAVE_API_KEY")
		}
		endpoint := c.BraveURL
		if endpoint == "" {
			endpoint = SearchBraveURL
		}
		base, err := searchBaseURL(endpoint)
		if err != nil {
			return nil, searchNotConfigured("Brave URL: %v", err)
		}
		return &searchBrave{endpoint: base, key: c.BraveAPIKey}, nil
	}
	return nil, searchNotConfigured("unknown search backend %q (WARDEN_SEARCH_BACKEND is searxng or brave)", c.Backend)
}

func searchBaseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("invalid URL: %s", httpErrText(err))
	}
	canon, _, uerr := httpCanonicalURL(u)
	if uerr != nil {
		return nil, errors.New(uerr.Message)
	}
	canon.RawQuery = ""
	return canon, nil
}

// SearchResult is one hit.
type SearchResult struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
}

// SearchData is the search tool's data.
type SearchData struct {
	Results []SearchResult `json:"results"`
	Backend string         `json:"backend"`
	Query   string         `json:"query"`
}

// searchBackend is one search service. requestURL is the URL a search for
// query would GET (its host is the call's net need); Search performs it
// through the guarded client.
type searchBackend interface {
	name() string
	requestURL(query string, n int) *url.URL
	Search(ctx context.Context, client *searchClient, query string, n int) ([]SearchResult, error)
}

// SearchTool is the `search` tool: a web search
// through a pluggable backend (SearXNG or Brave Search), returning
// {title, url, snippet} results. Its requests go through the same guarded
// client as the http tool. A 429 answer is retried at most 3 times, waiting
// as Retry-After says (bounded).
type SearchTool struct {
	Config SearchConfig

	net httpSeams
	// wait sleeps between retries (nil: a timer); tests record the waits.
	wait func(ctx context.Context, d time.Duration) error
	// now is the clock Retry-After dates are read against (nil: time.Now).
	now func() time.Time
}

var (
	_ tool.Typed[searchArgs]          = (*SearchTool)(nil)
	_ tool.TypedPreviewer[searchArgs] = (*SearchTool)(nil)
)

// Spec implements tool.Typed.
func (s *SearchTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "search",
		Description: "Search the web and return ranked results {title, url, snippet}. Uses the configured backend " +
			"(SearXNG or Brave Search); its host needs a net grant.",
		Capabilities: []capability.Kind{capability.Net},
	}
}

// searchArgs are the search tool's arguments; their schema is the tool's
// input schema.
type searchArgs struct {
	Query      string `json:"query" minLength:"1" maxLength:"2000" jsonschema:"what to search the web for"`
	NumResults *int   `json:"num_results,omitempty" minimum:"1" maximum:"20" jsonschema:"how many results (default 5, at most 20)"`
}

type searchPlan struct {
	backend searchBackend
	query   string
	n       int
	url     *url.URL
	need    capability.Need
}

func (s *SearchTool) prepare(a *searchArgs) (*searchPlan, *tool.Error) {
	p := &searchPlan{query: strings.TrimSpace(a.Query), n: searchDefaultResults}
	if p.query == "" {
		return nil, tool.Errorf(tool.CodeInvalidInput, "give a non-empty query", "query is empty")
	}
	if a.NumResults != nil {
		if *a.NumResults < 1 || *a.NumResults > searchMaxResults {
			return nil, tool.Errorf(tool.CodeInvalidInput, "num_results is 1 to 20", "num_results %d is out of range", *a.NumResults)
		}
		p.n = *a.NumResults
	}
	b, err := s.Config.backend()
	if err != nil {
		return nil, err
	}
	p.backend = b
	p.url = b.requestURL(p.query, p.n)
	_, need, uerr := httpCanonicalURL(p.url)
	if uerr != nil {
		return nil, searchNotConfigured("backend URL: %s", uerr.Message)
	}
	p.need = need
	return p, nil
}

// Needs implements tool.Typed: the net need of the backend's host. With
// no backend configured the call is refused here, before anything runs.
func (s *SearchTool) Needs(_ *tool.Call, a *searchArgs) ([]capability.Need, error) {
	p, err := s.prepare(a)
	if err != nil {
		return nil, err
	}
	return []capability.Need{p.need}, nil
}

// Preview implements tool.TypedPreviewer: the request the search would
// send. Nothing is sent: a query can carry data, so a dry run keeps it
// here.
func (s *SearchTool) Preview(_ context.Context, _ *tool.Call, a *searchArgs) tool.Outcome {
	p, err := s.prepare(a)
	if err != nil {
		return tool.Outcome{Err: err}
	}
	return tool.Outcome{
		Output: fmt.Sprintf("would search %s for %q (%d results): GET %s; needs %s; nothing was sent",
			p.backend.name(), p.query, p.n, p.url, p.need),
		Data: map[string]any{"backend": p.backend.name(), "query": p.query, "num_results": p.n, "url": p.url.String(), "need": p.need.String()},
	}
}

// Run implements tool.Typed.
func (s *SearchTool) Run(ctx context.Context, c *tool.Call, a *searchArgs) tool.Outcome {
	p, rerr := s.prepare(a)
	if rerr != nil {
		return tool.Outcome{Err: rerr}
	}
	g := &httpGuard{grants: c.Grants, workspace: c.Workspace, seams: s.net}
	hc := g.client()
	defer httpCloseClient(hc)
	ctx, cancel := context.WithTimeout(ctx, searchTimeout)
	defer cancel()
	sc := &searchClient{http: hc, backend: p.backend.name(), workspace: c.Workspace, wait: s.wait, now: s.now}
	results, err := p.backend.Search(ctx, sc, p.query, p.n)
	if err != nil {
		var re *tool.Error
		if errors.As(err, &re) {
			return tool.Outcome{Err: re}
		}
		e := httpClassify(err, c.Workspace, searchRequestTimeout)
		if e.Code == tool.CodeTimeout {
			// search has no timeout argument (http's hint names one): say
			// what bounds it instead.
			e = tool.Errorf(tool.CodeTimeout, "try again later, or check that the backend is up and answering",
				"%s gave no complete answer in time (at most %s a request, %s a search, within the caller's deadline)",
				p.backend.name(), searchRequestTimeout, searchTimeout)
		}
		return tool.Outcome{Err: e}
	}
	if len(results) > p.n {
		results = results[:p.n]
	}
	if results == nil {
		results = []SearchResult{}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d results from %s for %q", len(results), p.backend.name(), p.query)
	for i, r := range results {
		fmt.Fprintf(&b, "\n\n%d. %s\n   %s", i+1, r.Title, r.URL)
		if r.Snippet != "" {
			fmt.Fprintf(&b, "\n   %s", r.Snippet)
		}
	}
	var warnings []string
	if sc.retries > 0 {
		warnings = append(warnings, fmt.Sprintf("rate limited: retried %d times after HTTP 429", sc.retries))
	}
	return tool.Outcome{Output: b.String(), Data: SearchData{Results: results, Backend: p.backend.name(), Query: p.query}, Warnings: warnings}
}

// searchClient is what a backend sends its requests through: the guarded
// client, with 429 retries and a capped body.
type searchClient struct {
	http      *http.Client
	backend   string
	workspace string
	wait      func(ctx context.Context, d time.Duration) error
	now       func() time.Time
	retries   int
}

// get fetches u with header and returns the body of a 200 answer. A 429 is
// retried up to searchMaxRetries times after the wait Retry-After asks for
// (bounded); other answers are errors naming the status, with hint
// (backend-specific, for 401/403) saying what to fix.
func (sc *searchClient) get(ctx context.Context, u *url.URL, header http.Header, authHint string) ([]byte, error) {
	var waited time.Duration
	for attempt := 0; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, searchRequestTimeout)
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, u.String(), nil)
		if err != nil {
			cancel()
			return nil, err
		}
		req.Header = header.Clone()
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", httpUserAgent)
		resp, err := sc.http.Do(req)
		if err != nil {
			cancel()
			return nil, err
		}
		body, truncated, err := httpReadCapped(resp.Body, searchMaxBody)
		resp.Body.Close()
		cancel()
		if err != nil {
			return nil, err
		}
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			if attempt >= searchMaxRetries {
				return nil, tool.Errorf(tool.CodeNetworkError, "wait a while before searching again, or configure another backend",
					"rate limited by %s: HTTP 429 after %d retries", sc.backend, searchMaxRetries)
			}
			d := searchRetryAfter(resp.Header.Get("Retry-After"), sc.clock(), attempt)
			if d > searchMaxWait || waited+d > searchMaxTotalWait {
				return nil, tool.Errorf(tool.CodeNetworkError, fmt.Sprintf("try again after %s", d.Round(time.Second)),
					"rate limited by %s: HTTP 429 asking to wait %s, longer than warden waits (%s at a time, %s in all)", sc.backend, d.Round(time.Second), searchMaxWait, searchMaxTotalWait)
			}
			waited += d
			sc.retries++
			if err := sc.sleep(ctx, d); err != nil {
				return nil, err
			}
			continue
		case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
			return nil, tool.Errorf(tool.CodeToolError, authHint, "%s refused the search: %s", sc.backend, resp.Status)
		case resp.StatusCode != http.StatusOK:
			return nil, tool.Errorf(tool.CodeNetworkError, "try again later, or check the backend's address", "%s answered %s", sc.backend, resp.Status)
		case truncated:
			return nil, tool.Errorf(tool.CodeToolError, "check that the backend URL points at the search API", "%s answered more than %d bytes", sc.backend, searchMaxBody)
		}
		return body, nil
	}
}

func (sc *searchClient) clock() time.Time {
	if sc.now != nil {
		return sc.now()
	}
	return time.Now()
}

func (sc *searchClient) sleep(ctx context.Context, d time.Duration) error {
	if sc.wait != nil {
		return sc.wait(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// searchRetryAfter reads a Retry-After value — delay seconds or an HTTP
// date — into a wait; without a usable value it backs off 1 s, 2 s, 4 s.
func searchRetryAfter(v string, now time.Time, attempt int) time.Duration {
	v = strings.TrimSpace(v)
	if v != "" {
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
			if secs < 0 {
				secs = 0
			}
			if secs > int64(time.Hour/time.Second) {
				secs = int64(time.Hour / time.Second)
			}
			return time.Duration(secs) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil {
			if d := t.Sub(now); d > 0 {
				return d
			}
			return 0
		}
	}
	return time.Second << attempt
}

// searchDecode decodes a backend's JSON answer, or says it is not one.
func searchDecode(backend string, body []byte, v any, hint string) error {
	if err := json.Unmarshal(body, v); err != nil {
		return tool.Errorf(tool.CodeToolError, hint, "%s answered something that is not its JSON API: %v", backend, err)
	}
	return nil
}

var searchTags = lazyre.New(`<[^>]*>`)

// searchText turns a backend's title or snippet (which may hold <strong>
// and entities) into plain one-line text.
func searchText(s string) string {
	s = html.UnescapeString(searchTags.ReplaceAllString(s, ""))
	return strings.Join(strings.Fields(s), " ")
}

// searchSearXNG speaks the SearXNG JSON API: GET {base}/search?q=…&format=json.
type searchSearXNG struct{ base *url.URL }

func (b *searchSearXNG) name() string { return "searxng" }

func (b *searchSearXNG) requestURL(query string, _ int) *url.URL {
	u := *b.base
	u.Path = strings.TrimRight(u.Path, "/") + "/search"
	u.RawPath = ""
	u.RawQuery = url.Values{"q": {query}, "format": {"json"}}.Encode()
	return &u
}

func (b *searchSearXNG) Search(ctx context.Context, sc *searchClient, query string, n int) ([]SearchResult, error) {
	body, err := sc.get(ctx, b.requestURL(query, n), http.Header{},
		"enable the JSON format on the SearXNG instance (settings.yml: search: formats: [html, json]) and check WARDEN_SEARXNG_URL")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Results *[]struct {
			Title   string `json:"title"`
			URL     string `json:"url"`
			Content string `json:"content"`
		} `json:"results"`
	}
	if err := searchDecode("searxng", body, &doc, "check that WARDEN_SEARXNG_URL is a SearXNG instance with the JSON format enabled"); err != nil {
		return nil, err
	}
	if doc.Results == nil {
		return nil, tool.Errorf(tool.CodeToolError, "check that WARDEN_SEARXNG_URL is a SearXNG instance with the JSON format enabled",
			"searxng answered JSON without results")
	}
	var out []SearchResult
	for _, r := range *doc.Results {
		if r.URL == "" {
			continue
		}
		out = append(out, SearchResult{Title: searchText(r.Title), URL: r.URL, Snippet: searchText(r.Content)})
		if len(out) == n {
			break
		}
	}
	return out, nil
}

// searchBrave speaks the Brave Search web API: GET {endpoint}?q=…&count=n
// with X-Subscription-Token.
type searchBrave struct {
	endpoint *url.URL
	key      string
}

func (b *searchBrave) name() string { return "brave" }

func (b *searchBrave) requestURL(query string, n int) *url.URL {
	u := *b.endpoint
	u.RawQuery = url.Values{"q": {query}, "count": {strconv.Itoa(n)}}.Encode()
	return &u
}

func (b *searchBrave) Search(ctx context.Context, sc *searchClient, query string, n int) ([]SearchResult, error) {
	body, err := sc.get(ctx, b.requestURL(query, n), http.Header{"X-Subscription-Token": {b.key}},
		"check BRAVE_API_KEY (a Brave Search API subscription token)")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Type string `json:"type"`
		Web  *struct {
			Results []struct {
				Title       string `json:"title"`
				URL         string `json:"url"`
				Description string `json:"description"`
			} `json:"results"`
		} `json:"web"`
	}
	if err := searchDecode("brave", body, &doc, "check that the Brave endpoint is the web search API"); err != nil {
		return nil, err
	}
	if doc.Web == nil {
		if doc.Type == "" {
			return nil, tool.Errorf(tool.CodeToolError, "check that the Brave endpoint is the web search API", "brave answered JSON without web results")
		}
		return nil, nil // a valid answer with no web section: no results
	}
	var out []SearchResult
	for _, r := range doc.Web.Results {
		if r.URL == "" {
			continue
		}
		out = append(out, SearchResult{Title: searchText(r.Title), URL: r.URL, Snippet: searchText(r.Description)})
		if len(out) == n {
			break
		}
	}
	return out, nil
}
