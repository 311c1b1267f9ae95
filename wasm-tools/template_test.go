package wasmtools_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	wasmtools "github.com/wardenrt/warden/wasm-tools"
)

// templateMarker precedes each fenced block of the README's "Writing your
// own wasm tool" section that this test uses.
var templateMarker = regexp.MustCompile(`^<!-- template: (\S+) -->$`)

// readmeTemplates returns the fenced code blocks of README.md that follow a
// `<!-- template: NAME -->` line, by NAME.
func readmeTemplates(t *testing.T, readme []byte) map[string]string {
	t.Helper()
	blocks := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(readme))
	name, line := "", 0
	var body strings.Builder
	inBlock := false
	for sc.Scan() {
		line++
		text := sc.Text()
		switch {
		case inBlock && text == "```":
			blocks[name] = body.String()
			name, inBlock = "", false
			body.Reset()
		case inBlock:
			body.WriteString(text + "\n")
		case name != "" && strings.HasPrefix(text, "```"):
			inBlock = true
		case name != "" && strings.TrimSpace(text) != "":
			t.Fatalf("README.md:%d: template %s: a fenced block must follow its marker, found %q", line, name, text)
		default:
			if m := templateMarker.FindStringSubmatch(text); m != nil {
				if _, dup := blocks[m[1]]; dup {
					t.Fatalf("README.md:%d: template %s twice", line, m[1])
				}
				name = m[1]
			}
		}
	}
	if name != "" || inBlock {
		t.Fatalf("README.md: template %s has no complete fenced block", name)
	}
	return blocks
}

func TestReadmeTemplateBlocks(t *testing.T) {
	root, err := wasmtools.Root()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeTemplates(t, readme)
	for _, name := range []string{"setup.sh", "main.go", "hello.tool.yaml", "build.sh", "install.sh", "helper/main.go", "helper/setup.sh"} {
		if strings.TrimSpace(blocks[name]) == "" {
			t.Errorf("README.md has no template %s", name)
		}
	}
	if len(blocks) != 7 {
		t.Errorf("README.md has %d templates, want 7: %v", len(blocks), keysOf(blocks))
	}
	// The parser itself.
	got := readmeTemplates(t, []byte("x\n<!-- template: a.go -->\n\n```go\npackage a\n\n```\n```sh\nnot marked\n```\n<!-- template: b -->\n```\nb\n```\n"))
	if len(got) != 2 || got["a.go"] != "package a\n\n" || got["b"] != "b\n" {
		t.Fatalf("parsed %q", got)
	}
}

// TestReadmeTemplate follows the README's "Writing your own wasm tool" to
// the letter, offline: it runs the setup block in a temporary directory
// (GOPROXY=off: go-pdk comes from the module cache, and the go.sum lines
// it writes must match this module's), writes main.go and hello.tool.yaml
// from their blocks, runs the build block, and checks the module (exports,
// imports), the sidecar (parsed strictly, like the host) and the install
// block's arguments; then it runs hello under the fake host. It does the
// same for the helper-package variant (with the README's replace pointing
// at this checkout).
func TestReadmeTemplate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a guest module from the README; skipped with -short")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to run the README's shell blocks")
	}
	root, err := wasmtools.Root()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeTemplates(t, readme)
	for _, name := range []string{"setup.sh", "main.go", "hello.tool.yaml", "build.sh", "install.sh", "helper/main.go", "helper/setup.sh"} {
		if blocks[name] == "" {
			t.Fatalf("README.md has no template %s", name)
		}
	}

	// Make sure this module's dependencies are in the module cache (a
	// no-op when they are), with the environment's proxy; everything after
	// runs with GOPROXY=off.
	download := exec.Command("go", "mod", "download")
	download.Dir = root
	download.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := download.CombinedOutput(); err != nil {
		t.Fatalf("go mod download: %v\n%s", err, out)
	}
	wantSums := goSumLines(t, filepath.Join(root, "go.sum"))

	env := offlineEnv(filepath.Dir(root))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)

	for _, v := range []struct {
		name, main, setup string
	}{
		{"go-pdk only", "main.go", ""},
		{"helper package", "helper/main.go", "helper/setup.sh"},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			work := t.TempDir()
			runSh(t, work, env, "setup.sh", blocks["setup.sh"])
			dir := filepath.Join(work, "hello") // the setup block's mkdir
			writeFile(t, filepath.Join(dir, "main.go"), blocks[v.main])
			writeFile(t, filepath.Join(dir, "hello.tool.yaml"), blocks["hello.tool.yaml"])
			if v.setup != "" {
				runSh(t, dir, env, v.setup, blocks[v.setup])
			}
			runSh(t, dir, env, "build.sh", blocks["build.sh"])

			// go.sum: every line the README's steps wrote is one of this
			// module's (same go-pdk, same hashes).
			for line := range goSumLines(t, filepath.Join(dir, "go.sum")) {
				if !wantSums[line] {
					t.Errorf("go.sum line %q is not in wasm-tools/go.sum", line)
				}
			}
			bin, err := os.ReadFile(filepath.Join(dir, "hello.wasm"))
			if err != nil {
				t.Fatalf("the build block did not write hello.wasm: %v", err)
			}
			m, err := wasmtools.Inspect(bin)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("hello.wasm: %d bytes, exports %v, imports from warden %v", len(bin), keys(m.Exports, ""), keys(m.Imports, "warden."))
			for _, e := range []string{"_initialize", "call"} {
				if m.Exports[e] != "func" {
					t.Errorf("export %s missing", e)
				}
			}
			if m.Exports["memory"] != "memory" {
				t.Errorf("memory not exported")
			}
			for _, imp := range []string{"warden.warden_call", "extism:host/env.input_length", "extism:host/env.output_set", "extism:host/env.config_get"} {
				if m.Imports[imp] != "func" {
					t.Errorf("import %s missing", imp)
				}
			}
			for imp := range m.Imports {
				mod, _, _ := strings.Cut(imp, ".")
				if mod != "warden" && mod != "extism:host/env" && mod != "wasi_snapshot_preview1" {
					t.Errorf("unexpected import %s", imp)
				}
			}
			sidecar, err := os.ReadFile(filepath.Join(dir, "hello.tool.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			sc := checkSidecar(t, sidecar, "hello", wasmtools.Extism, m)
			if !slices.Contains(sc.Capabilities, "system.info") {
				t.Errorf("sidecar capabilities %v: the template calls system get_info", sc.Capabilities)
			}

			args := checkInstallBlock(t, blocks["install.sh"], sc)
			runHello(ctx, t, bin, args)
		})
	}
}

// checkInstallBlock checks that the install block installs hello.wasm with
// the grant the tool needs and calls it with arguments its schema accepts;
// it returns those arguments.
func checkInstallBlock(t *testing.T, block string, sc sidecar) string {
	t.Helper()
	if !strings.Contains(block, "warden tool install hello.wasm --grant system.info\n") {
		t.Errorf("install block does not install hello.wasm with --grant system.info:\n%s", block)
	}
	m := regexp.MustCompile(`(?m)^warden call hello --args '([^']*)'$`).FindStringSubmatch(block)
	if m == nil {
		t.Fatalf("install block has no `warden call hello --args '…'`:\n%s", block)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(m[1]), &args); err != nil {
		t.Fatalf("install block's --args %s: %v", m[1], err)
	}
	props, _ := sc.InputSchema["properties"].(map[string]any)
	for k := range args {
		if _, ok := props[k]; !ok {
			t.Errorf("install block's --args has %q, not in the sidecar's input_schema", k)
		}
	}
	req, _ := sc.InputSchema["required"].([]any)
	for _, k := range req {
		if _, ok := args[k.(string)]; !ok {
			t.Errorf("install block's --args lacks required %q", k)
		}
	}
	return m[1]
}

// runHello runs the built template under the fake host: the greeting from
// config, system get_info through warden_call, a denied call, bad input.
func runHello(ctx context.Context, t *testing.T, bin []byte, args string) {
	t.Helper()
	h := newFakeHost()
	h.config["greeting"] = "Hi"
	h.call = func(req []byte) []byte {
		if string(req) != `{"args":{"operation":"get_info"},"tool":"system"}` && string(req) != `{"tool":"system","args":{"operation":"get_info"}}` {
			t.Errorf("warden_call request %s", req)
		}
		return []byte(`{"tool":"system","call_id":"c1","success":true,"dry_run":false,"output":"linux/amd64","data":{"os":"linux","arch":"amd64"},"warnings":[],"duration_ms":0}`)
	}
	p := instantiatePlugin(ctx, t, bin, h)
	rc, out, msg, err := p.call(ctx, t, "call", args)
	if err != nil || rc != 0 {
		t.Fatalf("call %s: rc %d, error %q, %v", args, rc, msg, err)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || res["os"] != "linux" || !strings.HasPrefix(res["message"].(string), "Hi, ") {
		t.Fatalf("output %s: %v", out, err)
	}
	if len(h.requests) != 1 {
		t.Fatalf("warden_call requests: %q", h.requests)
	}

	h.call = func([]byte) []byte {
		return []byte(`{"tool":"system","call_id":"c2","success":false,"dry_run":false,"output":"","data":null,"warnings":[],"error":{"code":"CAPABILITY_DENIED","message":"needs system.info","hint":"warden tool grant hello system.info"},"duration_ms":0}`)
	}
	rc, _, msg, err = p.call(ctx, t, "call", `{"name":"Ada"}`)
	if err != nil || rc != 1 || !strings.HasPrefix(msg, "CAPABILITY_DENIED: needs system.info") {
		t.Fatalf("denied: rc %d, error %q, %v", rc, msg, err)
	}
	rc, _, msg, err = p.call(ctx, t, "call", `{"name":"Ada","extra":1}`)
	if err != nil || rc != 1 || !strings.Contains(msg, `unknown field "extra"`) {
		t.Fatalf("unknown field: rc %d, error %q, %v", rc, msg, err)
	}
}

// offlineEnv is the environment the README's shell blocks run in: no
// network (GOPROXY=off; GOSUMDB=off since go.sum is checked against this
// module's afterwards), no workspace, the local toolchain, and WARDEN
// pointing at this checkout for the helper variant's replace.
func offlineEnv(wardenRoot string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOOS", "GOARCH", "GOFLAGS", "GOPROXY", "GOSUMDB", "GONOSUMDB", "GONOSUMCHECK", "GONOPROXY", "GOPRIVATE",
			"GOINSECURE", "GOWORK", "GOTOOLCHAIN", "CGO_ENABLED", "WARDEN":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOPROXY=off", "GOSUMDB=off", "GOWORK=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0",
		"GOFLAGS=-buildvcs=false", "WARDEN="+wardenRoot)
}

// runSh runs a README shell block with sh -e in dir.
func runSh(t *testing.T, dir string, env []string, name, script string) {
	t.Helper()
	cmd := exec.Command("sh", "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README template %s failed: %v\n--- script\n%s--- output\n%s", name, err, script, out)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goSumLines returns the non-empty lines of a go.sum file.
func goSumLines(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines[l] = true
		}
	}
	return lines
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
