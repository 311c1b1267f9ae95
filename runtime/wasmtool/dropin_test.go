package wasmtool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenrt/warden/hostfuncs"
	"github.com/wardenrt/warden/internal/wasmfixture"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/runtime/wasmtool"
)

// Published modules (wasm-tools/compat) install and run unmodified: each
// installs, is listed with a valid name, answers a call, and refuses
// unknown and case-variant fields — warden's strictness, applied by warden.

func (e *env) tryInstall(file string, o wasmtool.InstallOptions) (*wasmtool.Pin, error) {
	e.t.Helper()
	o.Taken = e.core.Has
	in, err := e.host.Install(context.Background(), file, o)
	if err != nil {
		return nil, err
	}
	return in.Pin, nil
}

func wantInvalid(t *testing.T, g *gate.Gate, toolName string, args ...string) {
	t.Helper()
	for _, a := range args {
		wantCode(t, call(t, g, toolName, a), tool.CodeInvalidInput)
	}
}

func TestPublishedServletOpenSchemasAndCollidingName(t *testing.T) {
	e := newEnv(t)
	file := wasmfixture.Stage(t, "compat/bsky", "", false)
	// feed.timeline is no OpenAI function name, and search collides with
	// the core search: refused, with a naming that resolves both.
	_, err := e.tryInstall(file, wasmtool.InstallOptions{})
	var ne *wasmtool.ToolNameError
	if !errors.As(err, &ne) || ne.Tool != "feed.timeline" || ne.Fix == nil || wasmtool.NamingFlags(*ne.Fix) != "--prefix bsky_ --alias feed.timeline=bsky_feed_timeline" {
		t.Fatalf("want an invalid name and a fix, got %#v", err)
	}
	_, err = e.tryInstall(file, wasmtool.InstallOptions{Naming: wasmtool.Naming{Aliases: map[string]string{"feed.timeline": "timeline"}}})
	var ce *wasmtool.CollisionError
	if !errors.As(err, &ce) || !ce.Core || ce.Tool != "search" || ce.Fix == nil || wasmtool.NamingFlags(*ce.Fix) != "--prefix bsky_ --alias feed.timeline=timeline" {
		t.Fatalf("want a collision with the core search and a fix, got %#v", err)
	}
	if _, err := os.Stat(filepath.Join(e.home, "tools", "bsky.wasm")); !os.IsNotExist(err) {
		t.Fatalf("a refused install left its file: %v", err)
	}
	p, err := e.tryInstall(file, wasmtool.InstallOptions{Naming: *ce.Fix})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range p.Tools {
		names = append(names, tl.Name)
		if !gate.ValidToolName(tl.Name) {
			t.Errorf("invalid name %q", tl.Name)
		}
	}
	if strings.Join(names, ",") != "bsky_search,bsky_get_profile,timeline" || p.Tools[0].GuestName != "search" || p.Prefix != "bsky_" {
		t.Fatalf("tools %v, pin %+v", names, p)
	}
	// The open schemas were closed, and the misplaced required repaired;
	// the pin keeps the module's own schema and says what was done.
	search, profile := p.Tools[0], p.Tools[1]
	if search.Schema == nil || strings.Join(search.Schema.Closed, " ") != "# #/properties/filters" ||
		len(search.Schema.Open) != 1 || !strings.Contains(search.Schema.Open[0], "#/properties/extra") || len(search.ModuleSchema) == 0 {
		t.Fatalf("search schema report %+v", search.Schema)
	}
	if profile.Schema == nil || len(profile.Schema.Repairs) != 1 || !strings.Contains(profile.Schema.Repairs[0], "moved the required list") {
		t.Fatalf("get_profile schema report %+v", profile.Schema)
	}

	g, statuses := e.gate()
	if statuses[0].State != wasmtool.StateOK {
		t.Fatalf("status %+v", statuses[0])
	}
	// What every front end lists is the schema as enforced.
	spec := specOf(t, g, "bsky_search")
	if !bytes.Contains(spec.InputSchema, []byte(`"additionalProperties":false`)) {
		t.Fatalf("listed schema is not the enforced one: %s", spec.InputSchema)
	}
	res := call(t, g, "bsky_search", `{"q":"wasm","filters":{"lang":"en"},"extra":{"Any":1,"any":2}}`)
	wantCode(t, res, "")
	if !strings.Contains(res.Output, `"tool":"search"`) || !strings.Contains(res.Output, `"q":"wasm"`) {
		t.Fatalf("the guest did not get its own tool name: %s", res.Output)
	}
	wantInvalid(t, g, "bsky_search", `{"q":"x","Q":"y"}`, `{"q":"x","limit":3,"Limit":4}`, `{"q":"x","filters":{"lang":"en","Lang":"fr"}}`, `{"q":"x","top":1}`, `{}`)
	res = call(t, g, "bsky_get_profile", `{"handle":"ada"}`)
	wantCode(t, res, "")
	if !strings.Contains(res.Output, `"handle":"ada"`) {
		t.Fatalf("get_profile: %s", res.Output)
	}
	wantInvalid(t, g, "bsky_get_profile", `{}`, `{"handle":"a","Handle":"b"}`, `{"handle":"a","required":["handle"]}`)
	// Draft-07, allOf over a $ref, draft-03 required: all enforced.
	res = call(t, g, "timeline", `{"feed":"home","cursor":"c1","limit":5}`)
	wantCode(t, res, "")
	if !strings.Contains(res.Output, `"tool":"feed.timeline"`) || !strings.Contains(res.Output, `"cursor":"c1"`) {
		t.Fatalf("timeline: %s", res.Output)
	}
	wantInvalid(t, g, "timeline", `{}`, `{"feed":"home","Cursor":"c"}`, `{"feed":"home","page":2}`, `{"feed":"home","limit":"5"}`)
	// The core search is still the core search (here without a backend).
	if res := call(t, g, "search", `{"query":"x"}`); res.Success || res.Error.Code != tool.CodeOperationNotSupported {
		t.Fatalf("core search: %+v", res)
	}
}

func TestPublishedServletNamedLikeAnotherModulesTool(t *testing.T) {
	e := newEnv(t)
	e.install("examples/fetch", "fetch")
	file := wasmfixture.Stage(t, "compat/weather", "", false)
	_, err := e.tryInstall(file, wasmtool.InstallOptions{})
	var ce *wasmtool.CollisionError
	if !errors.As(err, &ce) || ce.Core || ce.Other != "fetch" || ce.Fix == nil || ce.Fix.Prefix != "weather_" {
		t.Fatalf("want a collision with module fetch, got %#v", err)
	}
	// Case variants collide too (a model may not tell them apart).
	_, err = e.tryInstall(file, wasmtool.InstallOptions{Naming: wasmtool.Naming{Aliases: map[string]string{"fetch": "FETCH"}}})
	if !errors.As(err, &ce) || ce.Other != "fetch" {
		t.Fatalf("want a collision for FETCH, got %v", err)
	}
	if _, err := e.tryInstall(file, wasmtool.InstallOptions{Naming: *ce.Fix}); err != nil {
		t.Fatal(err)
	}
	g, _ := e.gate()
	if !g.Registry().Has("weather_fetch") || !g.Registry().Has("fetch") {
		t.Fatal("weather_fetch and the example module's fetch are not both served")
	}
}

// TestServletConfigSecretAndHTTP: a servlet reads an API key the owner set
// as KEY=env:VAR and makes an http_request with it (status and response
// headers come back through the gate's http tool); a guest that echoes
// the key has it masked in everything the gate records or returns; without
// env:VAR granted the key is not given (and the call says so); a secret the
// gate cannot mask is never handed over.
func TestServletConfigSecretAndHTTP(t *testing.T) {
	const secret = "wk_live_5f3c9a1e7d2b4c6a8e0f"
	t.Setenv("WEATHER_TEST_KEY", secret)
	var gotKey string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey = r.Header.Get("X-Api-Key")
		w.Header().Set("X-Request-Id", "req-42")
		w.Write([]byte(`{"city":"` + r.URL.Query().Get("city") + `","temp_c":21}`))
	}))
	defer srv.Close()
	hostPort := strings.TrimPrefix(srv.URL, "http://")

	e := newEnv(t)
	if _, err := e.tryInstall(wasmfixture.Stage(t, "compat/weather", "", false), wasmtool.InstallOptions{Grants: []string{"net:" + hostPort}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.host.SetConfig(ctx, "weather", map[string]string{"API_KEY": "env:WEATHER_TEST_KEY", "BASE_URL": srv.URL}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.host.SetConfig(ctx, "weather", map[string]string{"bad key": "x"}, nil); err == nil {
		t.Fatal("a bad config key was accepted")
	}
	if _, err := e.host.SetConfig(ctx, "weather", map[string]string{"K": "env:1X"}, nil); err == nil {
		t.Fatal("a bad env:VAR was accepted")
	}
	// The pin holds the reference, never the value; inspect lists the key.
	doc, _ := e.pins.Pin(ctx, "weather")
	if bytes.Contains(doc, []byte(secret)) || !bytes.Contains(doc, []byte("env:WEATHER_TEST_KEY")) {
		t.Fatalf("pin: %s", doc)
	}
	in, err := e.host.Inspect(ctx, "weather", e.core.Has)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Config) != 2 || in.Config[0].Key != "API_KEY" || in.Config[0].Source != "owner-env" || in.Config[0].Env != "WEATHER_TEST_KEY" || in.Config[0].Value != "" {
		t.Fatalf("inspect config %+v", in.Config)
	}

	// Not granted env:WEATHER_TEST_KEY: the key is not given, and the
	// call says why.
	g := e.gateWith(redact.New(secret), "net:"+hostPort, "env:WEATHER_TEST_KEY")
	res := call(t, g, "fetch", `{"city":"Oslo"}`)
	if res.Success || !strings.Contains(res.Error.Message, "API_KEY is not configured") || len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0], "warden tool grant weather env:WEATHER_TEST_KEY") {
		t.Fatalf("without the env grant: %+v", res)
	}

	if _, _, err := e.host.Grant(ctx, "weather", []string{"env:WEATHER_TEST_KEY"}); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	e.host.Close(ctx)
	e.reopen(slog.New(slog.NewTextHandler(&logs, nil)))
	g = e.gateWith(redact.New(secret), "net:"+hostPort, "env:WEATHER_TEST_KEY")
	res = call(t, g, "fetch", `{"city":"Oslo","echo_key":true}`)
	wantCode(t, res, "")
	wantInvalid(t, g, "fetch", `{"city":"Oslo","City":"Rome"}`, `{"city":"Oslo","units":"c"}`)
	if gotKey != secret {
		t.Fatalf("the service got key %q", gotKey)
	}
	for _, want := range []string{`"status":200`, `"request_id":"req-42"`, `temp_c`, `"key":"[REDACTED:env-secret:`} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output lacks %s: %s", want, res.Output)
		}
	}
	all, _ := json.Marshal(e.audit.evs)
	if bytes.Contains(all, []byte(secret)) || strings.Contains(res.Output, secret) || strings.Contains(logs.String(), secret) {
		t.Fatalf("the secret leaked:\naudit %s\nlogs %s", all, logs.String())
	}
	if !strings.Contains(string(all), `"tool":"http"`) {
		t.Fatalf("the guest's request is not on the audit log as an http call: %s", all)
	}

	// A gate whose redactor does not know the value: never handed over.
	g = e.gateWith(nil, "net:"+hostPort, "env:WEATHER_TEST_KEY")
	res = call(t, g, "fetch", `{"city":"Oslo","echo_key":true}`)
	if res.Success || res.Error.Code != tool.CodeInternal || !strings.Contains(res.Error.Message, "could not mask") || strings.Contains(res.Output, secret) {
		t.Fatalf("an unmaskable secret: %+v", res)
	}
}

// TestRawTextPlugin: a published Extism plugin with its conventional
// export name (count_vowels) and raw text input runs with a two-line
// sidecar: the export is found, input: {from: text} passes the string as
// raw bytes, and the derived schema refuses unknown and case-variant
// fields. output: text returns the output unparsed (no data, even for
// JSON); output: json makes it the data, and refuses output that is not
// JSON with TOOL_ERROR.
func TestRawTextPlugin(t *testing.T) {
	e := newEnv(t)
	file := wasmfixture.Stage(t, "compat/count_vowels", "", false)
	if _, err := e.tryInstall(file, wasmtool.InstallOptions{}); err == nil || !strings.Contains(err.Error(), "needs a sidecar") {
		t.Fatalf("without a sidecar: %v", err)
	}
	sc := "description: Count the vowels in a text.\ninput: {from: text}\n"
	if err := os.WriteFile(strings.TrimSuffix(file, ".wasm")+".tool.yaml", []byte(sc), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := e.tryInstall(file, wasmtool.InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.ABI != wasmtool.ABIExtism || p.Tools[0].Name != "count_vowels" || p.Tools[0].Export != "count_vowels" || p.InputFrom != "text" {
		t.Fatalf("pin %+v", p)
	}
	g, _ := e.gate()
	res := call(t, g, "count_vowels", `{"text":"Hello, World!"}`)
	wantCode(t, res, "")
	if !strings.Contains(res.Output, `"count":3`) || !strings.Contains(res.Output, `"vowels":"aeiouAEIOU"`) {
		t.Fatalf("output %s", res.Output)
	}
	wantInvalid(t, g, "count_vowels", `{"text":"a","Text":"b"}`, `{"text":"a","lang":"en"}`, `{}`, `{"text":3}`)
	if string(res.Data) != string(res.Output) {
		t.Fatalf("output unset: a JSON object is also the data, got data %s", res.Data)
	}

	// output: text — the output is never parsed, even when it is JSON.
	file = wasmfixture.Stage(t, "compat/count_vowels", "cv_text", false)
	os.WriteFile(strings.TrimSuffix(file, ".wasm")+".tool.yaml", []byte(sc+"output: text\n"), 0o600)
	if p, err = e.tryInstall(file, wasmtool.InstallOptions{}); err != nil || p.Output != wasmtool.OutputText {
		t.Fatalf("output: text: %v %+v", err, p)
	}
	// output: json — the output must be JSON, and is the data.
	file = wasmfixture.Stage(t, "compat/count_vowels", "cv_json", false)
	os.WriteFile(strings.TrimSuffix(file, ".wasm")+".tool.yaml", []byte(sc+"output: json\n"), 0o600)
	if _, err = e.tryInstall(file, wasmtool.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	// output: json from a plugin whose output is text ("AAAAA").
	file = wasmfixture.Stage(t, "hostile/hugeoutput", "notjson", false)
	os.WriteFile(strings.TrimSuffix(file, ".wasm")+".tool.yaml",
		[]byte("description: Five letters.\nexport: call\ninput_schema: {type: object}\nconfig: {bytes: \"5\"}\noutput: json\n"), 0o600)
	if _, err = e.tryInstall(file, wasmtool.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	g, _ = e.gate()
	res = call(t, g, "cv_text", `{"text":"Hello, World!"}`)
	wantCode(t, res, "")
	if !strings.HasPrefix(res.Output, `{"count":3,`) || !noData(res) {
		t.Fatalf("output: text: output %q, data %s", res.Output, res.Data)
	}
	wantInvalid(t, g, "cv_text", `{"text":"a","Text":"b"}`, `{"text":"a","lang":"en"}`)
	res = call(t, g, "cv_json", `{"text":"Hello, World!"}`)
	wantCode(t, res, "")
	var data struct{ Count int }
	if err := json.Unmarshal(res.Data, &data); err != nil || data.Count != 3 {
		t.Fatalf("output: json: data %s (%v)", res.Data, err)
	}
	res = call(t, g, "notjson", `{}`)
	wantCode(t, res, tool.CodeToolError)
	if !strings.Contains(res.Error.Message, "not JSON, as its sidecar says (output: json)") || !strings.Contains(res.Error.Message, `"AAAAA"`) || !noData(res) {
		t.Fatalf("output: json, text out: %+v", res)
	}
}

// noData says the result carries no structured data (the envelope's
// empty data object).
func noData(res tool.Result) bool {
	return len(res.Data) == 0 || string(res.Data) == "{}"
}

// TestKernelAndWASIFunctions: a module importing every Extism kernel
// function and the WASI functions published builds import gets them all,
// none giving ambient authority: no arguments, no environment, a real
// clock and randomness, stdout captured; http_request, its status code and
// response headers through the gate; proc_exit in a call stops that call
// only.
func TestKernelAndWASIFunctions(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Probe-Reply", r.Header.Get("X-Probe"))
		w.WriteHeader(203)
		w.Write([]byte("probe body"))
	}))
	defer srv.Close()
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	t.Setenv("WARDEN_PROBE_SHOULD_NOT_SEE", "x")

	e := newEnv(t)
	var logs bytes.Buffer
	e.host.Close(context.Background())
	e.reopen(slog.New(slog.NewTextHandler(&logs, nil)))
	if _, err := e.tryInstall(wasmfixture.Stage(t, "compat/abiprobe", "", false), wasmtool.InstallOptions{Grants: []string{"net:" + hostPort}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.host.SetConfig(context.Background(), "abiprobe", map[string]string{"greeting": "hi"}, nil); err != nil {
		t.Fatal(err)
	}
	g, _ := e.gate("net:" + hostPort)
	res := call(t, g, "abi_probe", `{"url":"`+srv.URL+`/x"}`)
	wantCode(t, res, "")
	var r map[string]any
	if err := json.Unmarshal([]byte(res.Output), &r); err != nil {
		t.Fatalf("%v: %s", err, res.Output)
	}
	want := map[string]any{
		"length": 10.0, "length_unsafe": 10.0, "load_store": true, "error_roundtrip": true, "input_offset_set": true,
		"config_greeting": "hi", "config_missing": true, "var_calls": "x",
		"http_status": 203.0, "http_body": "probe body", "http_header": "1",
		"args": 0.0, "environ": 0.0, "args_sizes_errno": 0.0, "args_get_errno": 0.0, "environ_sizes_errno": 0.0, "environ_get_errno": 0.0,
		"clock_errno": 0.0, "random_errno": 0.0, "random_differs": true, "fd_write_errno": 0.0, "fd_write": 16.0,
		"sched_yield_errno": 0.0, "poll_oneoff_errno": 0.0, "poll_oneoff_slept": true,
	}
	for k, v := range want {
		if r[k] != v {
			t.Errorf("%s = %v, want %v", k, r[k], v)
		}
	}
	if y, _ := r["clock_year"].(float64); y < 2025 {
		t.Errorf("clock_year %v: not a real clock", r["clock_year"])
	}
	if strings.Contains(res.Output, "abiprobe stdout") || !strings.Contains(logs.String(), "abiprobe stdout") {
		t.Errorf("the guest's stdout was not captured into warden's log:\n%s", logs.String())
	}
	// proc_exit in the middle of a call ends that call, not warden.
	res = call(t, g, "abi_exit", `{"code":3}`)
	if res.Success || res.Error.Code != tool.CodeWasmTrap || !strings.Contains(res.Error.Message, "exited with code 3") {
		t.Fatalf("abi_exit: %+v", res)
	}
	wantCode(t, call(t, g, "abi_probe", `{}`), "")
	wantInvalid(t, g, "abi_probe", `{"URL":"x"}`, `{"url":"x","x":1}`)
}

// TestStartExportingServlet: a servlet that also exports _start (as
// TinyGo -target wasi builds do) is a servlet: warden, like every Extism
// host, never runs _start (here it would trap); a plugin exporting _start
// beside its conventional export is an Extism plugin, not a WASI command.
// Both refuse unknown and case-variant fields.
func TestStartExportingServlet(t *testing.T) {
	e := newEnv(t)
	b, err := wasmfixture.WithStart(wasmfixture.Bytes(t, "examples/jsontools", false), wasmfixture.StartTraps)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "tinyjson.wasm")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := e.tryInstall(file, wasmtool.InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.ABI != wasmtool.ABIServlet || len(p.Tools) != 2 {
		t.Fatalf("pin %+v", p)
	}
	g, _ := e.gate()
	res := call(t, g, "json_query", `{"json":"{\"a\":[1,2]}","path":"a[1]"}`)
	wantCode(t, res, "")
	if strings.TrimSpace(res.Output) != "2" {
		t.Fatalf("json_query: %q", res.Output)
	}
	wantInvalid(t, g, "json_query", `{"json":"{}","path":"a","Path":"b"}`, `{"json":"{}","path":"a","limit":1}`)

	cv, err := wasmfixture.WithStart(wasmfixture.Bytes(t, "compat/count_vowels", false), wasmfixture.StartReturns)
	if err != nil {
		t.Fatal(err)
	}
	file = filepath.Join(dir, "vowels.wasm")
	os.WriteFile(file, cv, 0o600)
	// Its sidecar's schema is open, as published ones are: warden closes it.
	os.WriteFile(filepath.Join(dir, "vowels.tool.yaml"), []byte("description: Count vowels.\ninput: {from: text}\n"+
		"input_schema: {type: object, properties: {text: {type: string}}, required: [text]}\n"), 0o600)
	p, err = e.tryInstall(file, wasmtool.InstallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.ABI != wasmtool.ABIExtism || p.Tools[0].Export != "count_vowels" {
		t.Fatalf("pin %+v", p)
	}
	g, _ = e.gate()
	if res := call(t, g, "vowels", `{"text":"aaa"}`); !res.Success || !strings.Contains(res.Output, `"count":3`) {
		t.Fatalf("vowels: %+v", res)
	}
	wantInvalid(t, g, "vowels", `{"text":"a","Text":"b"}`, `{"text":"a","lang":"en"}`)
}

// TestServletSidecarOverrides: the owner replaces one tool's description
// and schema in the sidecar; both are pinned with the module's own schema,
// listed as overrides, and enforced (closed) like any.
func TestServletSidecarOverrides(t *testing.T) {
	e := newEnv(t)
	file := wasmfixture.Stage(t, "compat/bsky", "", false)
	sc := `name: bsky
abi: servlet
tools:
  get_profile:
    description: Look up a profile (owner's words).
    input_schema:
      type: object
      properties:
        handle: {type: string, pattern: "^[a-z0-9.]+$"}
      required: [handle]
`
	os.WriteFile(strings.TrimSuffix(file, ".wasm")+".tool.yaml", []byte(sc), 0o600)
	p, err := e.tryInstall(file, wasmtool.InstallOptions{Naming: wasmtool.Naming{Prefix: "bsky_", Aliases: map[string]string{"feed.timeline": "bsky_timeline"}}})
	if err != nil {
		t.Fatal(err)
	}
	prof := p.Tools[1]
	if prof.Name != "bsky_get_profile" || prof.Description != "Look up a profile (owner's words)." || strings.Join(prof.Overrides, ",") != "description,input_schema" {
		t.Fatalf("tool %+v", prof)
	}
	// The module's own schema is kept beside the override (inspect shows
	// it, approve diffs it): its describe's words, not the owner's.
	if !bytes.Contains(prof.ModuleSchema, []byte(`"description":"the user's handle"`)) || bytes.Contains(prof.ModuleSchema, []byte(`"pattern"`)) ||
		!bytes.Contains(prof.InputSchema, []byte(`"pattern":"^[a-z0-9.]+$"`)) {
		t.Fatalf("module schema %s, enforced %s", prof.ModuleSchema, prof.InputSchema)
	}
	notes := strings.Join(prof.Notes(), "\n")
	if !strings.Contains(notes, "input_schema overridden by the sidecar") || !strings.Contains(notes, "exposed as bsky_get_profile") {
		t.Fatalf("notes %s", notes)
	}
	g, _ := e.gate()
	wantCode(t, call(t, g, "bsky_get_profile", `{"handle":"ada.bsky"}`), "")
	wantInvalid(t, g, "bsky_get_profile", `{"handle":"ADA"}`, `{"handle":"ada","x":1}`)

	// An override for a tool describe does not list is refused.
	os.WriteFile(strings.TrimSuffix(file, ".wasm")+".tool.yaml", []byte("abi: servlet\ntools:\n  nosuch: {description: x}\n"), 0o600)
	if _, err := e.tryInstall(file, wasmtool.InstallOptions{Name: "bsky2", Naming: wasmtool.Naming{Prefix: "b2_", Aliases: map[string]string{"feed.timeline": "b2_timeline"}}}); err == nil || !strings.Contains(err.Error(), "lists no tool \"nosuch\"") {
		t.Fatalf("override of an unknown tool: %v", err)
	}
}

// TestModuleSchemaChangeUnderOverrideIsShown: a servlet whose schema the
// owner overrides is updated, and only its own schema changes (the one
// enforced is still the override): approve's diff shows the module's new
// schema — never a silent change — and the pin keeps it.
func TestModuleSchemaChangeUnderOverrideIsShown(t *testing.T) {
	e := newEnv(t)
	file := wasmfixture.Stage(t, "compat/bsky", "", false)
	sc := "abi: servlet\ntools:\n  get_profile:\n    input_schema: {type: object, properties: {handle: {type: string}}, required: [handle]}\n"
	if err := os.WriteFile(strings.TrimSuffix(file, ".wasm")+".tool.yaml", []byte(sc), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tryInstall(file, wasmtool.InstallOptions{Naming: wasmtool.Naming{Prefix: "bsky_", Aliases: map[string]string{"feed.timeline": "bsky_timeline"}}}); err != nil {
		t.Fatal(err)
	}
	// The new version: get_profile's own schema gains a property.
	v2, err := os.ReadFile(wasmfixture.Edited(t, "compat/bsky", false,
		`"handle":{"type":"string","description":"the user's handle"},`,
		`"handle":{"type":"string","description":"the user's handle"},"did":{"type":"string","description":"or the user's DID"},`))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.home, "tools", "bsky.wasm"), v2, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ch, err := e.host.Diff(ctx, "bsky", nil)
	if err != nil {
		t.Fatal(err)
	}
	diff := ch.String()
	if !ch.Changed() || !strings.Contains(diff, "~ tool bsky_get_profile: the module's input schema ") || !strings.Contains(diff, `"did":{"type":"string","description":"or the user's DID"}`) {
		t.Fatalf("the module's schema change is not shown:\n%s", diff)
	}
	if strings.Contains(diff, "bsky_get_profile: input schema as enforced") || strings.Contains(diff, "~ tool bsky_search") || strings.Contains(diff, "~ tool bsky_timeline") {
		t.Fatalf("the diff shows changes that are not there:\n%s", diff)
	}
	p, err := e.host.Approve(ctx, "bsky", ch.New, "test", e.core.Has)
	if err != nil {
		t.Fatal(err)
	}
	if prof := p.Tools[1]; !bytes.Contains(prof.ModuleSchema, []byte(`"did"`)) || bytes.Contains(prof.InputSchema, []byte(`"did"`)) {
		t.Fatalf("pinned module schema %s, enforced %s", prof.ModuleSchema, prof.InputSchema)
	}
	// The override still decides what is accepted.
	g, _ := e.gate()
	wantCode(t, call(t, g, "bsky_get_profile", `{"handle":"ada"}`), "")
	wantInvalid(t, g, "bsky_get_profile", `{"handle":"ada","did":"did:plc:x"}`)
}

// TestApproveRenamesAndShowsSchemaChanges: approve with a prefix renames
// the tools (a change even when the files are the same); a new version
// that changes a tool's schema keeps the names and shows the change, both
// of the module's own schema and of the one enforced.
func TestApproveRenamesAndShowsSchemaChanges(t *testing.T) {
	e := newEnv(t)
	e.install("examples/jsontools", "jsontools")
	ctx := context.Background()
	n := &wasmtool.Naming{Prefix: "j_"}
	ch, err := e.host.Diff(ctx, "jsontools", n)
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Changed() || !strings.Contains(ch.String(), `prefix "" → "j_"`) || !strings.Contains(ch.String(), "json_query: renamed json_query → j_json_query") {
		t.Fatalf("diff:\n%s", ch)
	}
	if _, err := e.host.Approve(ctx, "jsontools", ch.New, "test", e.core.Has); err != nil {
		t.Fatal(err)
	}
	g, _ := e.gate()
	wantCode(t, call(t, g, "j_json_query", `{"json":"[1]","path":"0"}`), "")
	if g.Registry().Has("json_query") {
		t.Fatal("the old name is still served")
	}
	// Re-approving without naming keeps the prefix.
	ch, err = e.host.Diff(ctx, "jsontools", nil)
	if err != nil || ch.Changed() {
		t.Fatalf("unchanged module: %v %v", err, ch)
	}
	// A new version whose json_query schema says more: the diff shows it,
	// under the name the prefix gives.
	v2, err := os.ReadFile(wasmfixture.Edited(t, "examples/jsontools", false, `"The path to select."`, `"The path to select, e.g. a[1].b."`))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.home, "tools", "jsontools.wasm"), v2, 0o600); err != nil {
		t.Fatal(err)
	}
	ch, err = e.host.Diff(ctx, "jsontools", nil)
	if err != nil {
		t.Fatal(err)
	}
	diff := ch.String()
	for _, want := range []string{"~ tool j_json_query: the module's input schema ", "~ tool j_json_query: input schema as enforced ", `"The path to select, e.g. a[1].b."`} {
		if !ch.Changed() || !strings.Contains(diff, want) {
			t.Fatalf("diff lacks %q:\n%s", want, diff)
		}
	}
	if strings.Contains(diff, "~ tool j_json_format") || strings.Contains(diff, "renamed") {
		t.Fatalf("the diff shows changes that are not there:\n%s", diff)
	}
	if _, err := e.host.Approve(ctx, "jsontools", ch.New, "test", e.core.Has); err != nil {
		t.Fatal(err)
	}
	g, _ = e.gate()
	if spec := specOf(t, g, "j_json_query"); !bytes.Contains(spec.InputSchema, []byte("e.g. a[1].b.")) {
		t.Fatalf("the approved schema is not served: %s", spec.InputSchema)
	}
}

// gateWith is gate with a redactor.
func (e *env) gateWith(red *redact.Redactor, grants ...string) *gate.Gate {
	e.t.Helper()
	g, _ := e.gate(grants...)
	reg := g.Registry()
	p := g.Policy()
	ng, err := gate.NewGate(gate.GateOptions{Registry: reg, Policy: p, Workspace: e.ws, Audit: e.audit, Approval: tool.ApproveAuto, Redactor: red})
	if err != nil {
		e.t.Fatal(err)
	}
	return ng
}

// reopen opens the host again with a logger for guest output.
func (e *env) reopen(lg *slog.Logger) {
	e.t.Helper()
	h, err := wasmtool.Open(context.Background(), wasmtool.Options{
		Dir: filepath.Join(e.home, "tools"), CacheDir: sharedCache, Pins: e.pins, HostFuncs: hostfuncs.Functions(), Logger: lg,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.host = h
	e.t.Cleanup(func() { h.Close(context.Background()) })
}

func specOf(t *testing.T, g *gate.Gate, name string) tool.Spec {
	t.Helper()
	for _, s := range g.Registry().Specs() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no tool %s", name)
	return tool.Spec{}
}
