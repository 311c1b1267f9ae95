//go:build linux

package ops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

// ---- fixtures -------------------------------------------------------------

// fixture is a directory of fake journalctl and systemctl programs
// (shell scripts) that emulate systemd for the tests: each records its argv
// in a log, systemctl restart changes a state file (the unit's main PID), so
// a test can prove whether a restart ran.
type fixture struct {
	bin     string // the directory put first on the search path
	log     string // one line per program run: $0 [arg] [arg] …
	state   string // the fixture units' main PID, incremented by restart
	envFile string // journalctl --unit=env.service dumps its environment here
}

const opsJournal = `{"__CURSOR":"s=1","__REALTIME_TIMESTAMP":"1714989600000000","PRIORITY":"6","_PID":"1234","_SYSTEMD_UNIT":"nginx.service","SYSLOG_IDENTIFIER":"nginx","MESSAGE":"started","_HOSTNAME":"web1"}
{"__REALTIME_TIMESTAMP":"1714989601000000","PRIORITY":"3","_PID":"1234","_SYSTEMD_UNIT":"nginx.service","SYSLOG_IDENTIFIER":"nginx","MESSAGE":[104,105,255]}
this line is not JSON
{"__REALTIME_TIMESTAMP":"1714989602000000","PRIORITY":"4","UNIT":"nginx.service","SYSLOG_IDENTIFIER":"systemd","MESSAGE":null}
`

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	fx := &fixture{
		bin: filepath.Join(dir, "bin"), log: filepath.Join(dir, "argv.log"),
		state: filepath.Join(dir, "state"), envFile: filepath.Join(dir, "env"),
	}
	if err := os.Mkdir(fx.bin, 0o755); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(dir, "journal.json")
	tooltest.WriteFile(t, journal, opsJournal, 0o644)
	tooltest.WriteFile(t, fx.state, "100\n", 0o644)
	record := `printf '%s' "$0" >> '` + fx.log + `'
for a in "$@"; do printf ' [%s]' "$a" >> '` + fx.log + `'; done
printf '\n' >> '` + fx.log + `'
for last; do :; done
`
	tooltest.WriteFile(t, filepath.Join(fx.bin, "journalctl"), `#!/bin/sh
`+record+`case "$last" in
--unit=broken.service) echo "Failed to open journal: boom" >&2; exit 1;;
--unit=slow.service) exec sleep 30;;
--unit=empty.service) echo "Hint: You are currently not seeing messages from other users." >&2; exit 0;;
--unit=flood.service) head -c 18000000 /dev/zero | tr '\0' x; exit 0;;
--unit=many.service) i=0; while [ $i -lt 300 ]; do i=$((i+1)); printf '{"MESSAGE":"m%d","PRIORITY":"6"}\n' $i; done; exit 0;;
--unit=env.service) env > '`+fx.envFile+`'; exit 0;;
--unit=secret.service) printf '{"MESSAGE":"token=%s","PRIORITY":"6"}\n' '`+tooltest.Canary+`'; exit 0;;
esac
cat '`+journal+`'
`, 0o755)
	tooltest.WriteFile(t, filepath.Join(fx.bin, "systemctl"), `#!/bin/sh
`+record+`case "$1" in
show)
  case "$last" in
  missing.service) printf 'Id=%s\nLoadState=not-found\nActiveState=inactive\nSubState=dead\nLoadError=org.freedesktop.systemd1.NoSuchUnit "Unit %s not found."\n' "$last" "$last"; exit 0;;
  nosystemd.service) echo "System has not been booted with systemd as init system (PID 1). Can't operate." >&2; echo "Failed to connect to bus: Host is down" >&2; exit 1;;
  slow.service) exec sleep 30;;
  garbage.service) echo "hello"; exit 0;;
  esac
  pid=$(cat '`+fx.state+`')
  printf 'Id=%s\nDescription=Fixture %s\nLoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\nMainPID=%s\nExecMainStatus=0\nResult=success\nNRestarts=2\nActiveEnterTimestamp=Mon 2024-05-06 10:00:00 UTC\nMemoryCurrent=4096\nFragmentPath=/lib/systemd/system/%s\n' "$last" "$last" "$pid" "$last"
  ;;
restart)
  case "$last" in
  failing.service) echo "Job for failing.service failed because the control process exited with error code." >&2; exit 1;;
  slowrestart.service) exec sleep 30;;
  esac
  echo $(( $(cat '`+fx.state+`') + 1 )) > '`+fx.state+`'
  ;;
*) echo "unknown command $1" >&2; exit 1;;
esac
`, 0o755)
	return fx
}

// calls returns the programs run so far, one line each.
func (fx *fixture) calls(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(fx.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// restarts counts the systemctl restart runs.
func (fx *fixture) restarts(t testing.TB) int {
	n := 0
	for _, c := range fx.calls(t) {
		if strings.Contains(c, "/systemctl [restart]") {
			n++
		}
	}
	return n
}

func (fx *fixture) pid(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(fx.state)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// fakeArtifacts is an in-memory gate.Artifacts.
type fakeArtifacts struct {
	mu    sync.Mutex
	blobs map[string][]byte
	err   error
}

func (a *fakeArtifacts) PutArtifact(_ context.Context, data []byte) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return "", a.err
	}
	if a.blobs == nil {
		a.blobs = map[string][]byte{}
	}
	sum := sha256.Sum256(data)
	d := "sha256:" + hex.EncodeToString(sum[:])
	a.blobs[d] = bytes.Clone(data)
	return d, nil
}

func (a *fakeArtifacts) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.blobs)
}

func (a *fakeArtifacts) get(d string) ([]byte, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.blobs[d]
	return b, ok
}

// opsEnv is one test's world: a workspace with conf/app.conf, a granted
// absolute directory outside it with etc/nginx/nginx.conf, an ungranted
// directory, the fixture programs and a gate over the ops tools.
type opsEnv struct {
	ws, abs, outside string
	fx               *fixture
	arts             *fakeArtifacts
	ops              *Config
	g                *gate.Gate
	audit            *runtimetest.Audit
}

const appConf = "# app\nlisten 80\nworkers 1\nlog /var/log/app.log\n"
const nginxConf = "user www-data;\nworker_processes 1;\npid /run/nginx.pid;\n"

func rules() string {
	return `rules:
  - { tool: restart_service, action: allow, require_approval: true, dry_run_first: true }
  - { tool: modify_config,   action: allow, require_approval: true, dry_run_first: true }
`
}

// opsPolicy grants the fixture programs, reading the workspace, writing
// conf/ and reading and writing the absolute directory.
func (e *opsEnv) policy(extra ...string) string {
	grants := append([]string{"exec:journalctl", "exec:systemctl", "fs.read:**", "fs.write:conf/**",
		"fs.read:" + e.abs + "/**", "fs.write:" + e.abs + "/**"}, extra...)
	q := make([]string, len(grants))
	for i, g := range grants {
		q[i] = fmt.Sprintf("%q", g)
	}
	return "version: 1\ngrants: [" + strings.Join(q, ", ") + "]\n" + rules()
}

// fixtureTools are the programs the fake journalctl and systemctl
// scripts run.
var fixtureTools = []string{"/bin/sh", "/bin/sleep", "/bin/cat", "/usr/bin/head", "/usr/bin/tr", "/usr/bin/env", "/usr/bin/printf"}

func setup(t testing.TB) *opsEnv {
	t.Helper()
	resolve := func(d string) string {
		r, err := filepath.EvalSymlinks(d)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	e := &opsEnv{ws: resolve(t.TempDir()), abs: resolve(t.TempDir()), outside: resolve(t.TempDir()), fx: newFixture(t), arts: &fakeArtifacts{}}
	tooltest.WriteFile(t, filepath.Join(e.ws, "conf", "app.conf"), appConf, 0o640)
	tooltest.WriteFile(t, filepath.Join(e.abs, "etc", "nginx", "nginx.conf"), nginxConf, 0o644)
	tooltest.WriteFile(t, filepath.Join(e.outside, "secret.conf"), "OUTSIDE SECRET\n", 0o600)
	e.ops = &Config{Artifacts: e.arts, SearchPath: e.fx.bin + ":" + DefaultSearchPath, Timeout: 20 * time.Second,
		// The fake programs record their argv and state beside them.
		Sandbox: sandbox.Spec{Write: []string{filepath.Dir(e.fx.bin)}, Exec: fixtureTools}}
	e.gate(t, e.policy())
	return e
}

// timeoutFor makes the programs' deadline short for a test that expects
// COMMAND_TIMEOUT, and generous otherwise (a loaded machine is no failure).
func (e *opsEnv) timeoutFor(code tool.Code) {
	if code == tool.CodeCommandTimeout {
		e.ops.Timeout = 300 * time.Millisecond
	} else {
		e.ops.Timeout = 20 * time.Second
	}
}

// gate (re)builds the gate with a policy.
func (e *opsEnv) gate(t testing.TB, policy string) {
	t.Helper()
	e.g, e.audit = tooltest.Gate(t, policy, e.ws, e.ops.tools()...)
}

func (e *opsEnv) call(t testing.TB, tool, args string) tool.Result {
	t.Helper()
	return tooltest.Call(t, e.g, tool, args)
}

func (e *opsEnv) dryRun(t testing.TB, tool, args string) tool.Result {
	t.Helper()
	return tooltest.CallReq(t, e.g, gate.Request{Tool: tool, Args: json.RawMessage(args), Principal: []string{"test"}, DryRun: true})
}

// checksum covers everything a call could change: the workspace, the
// absolute and outside directories and the fixture's state.
func (e *opsEnv) checksum(t testing.TB) string {
	return tooltest.TreeChecksum(t, e.ws) + tooltest.TreeChecksum(t, e.abs) + tooltest.TreeChecksum(t, e.outside) + e.fx.pid(t)
}

func opsArgs(kv ...any) string {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func wantErr(t testing.TB, res tool.Result, code tool.Code, substr string) {
	t.Helper()
	if res.Success || res.Error == nil {
		t.Fatalf("%s succeeded, want %s: %s", res.Tool, code, res.Output)
	}
	if res.Error.Code != code {
		t.Fatalf("%s: code %s, want %s: %+v", res.Tool, res.Error.Code, code, res.Error)
	}
	if substr != "" && !strings.Contains(res.Error.Message+" | "+res.Error.Hint, substr) {
		t.Fatalf("%s: error %+v does not mention %q", res.Tool, res.Error, substr)
	}
}

func hasWarning(res tool.Result, substr string) bool {
	for _, w := range res.Warnings {
		if strings.Contains(w, substr) {
			return true
		}
	}
	return false
}

// ---- Config configuration ----------------------------------------------------

func TestOpsToolsSpecs(t *testing.T) {
	reg := gate.NewRegistry()
	if err := reg.Register(Tools(Config{})...); err != nil {
		t.Fatal(err) // every schema compiles and is closed
	}
	want := map[string]bool{"read_logs": true, "service_status": true, "read_config": true, "restart_service": false, "modify_config": false}
	for _, s := range reg.Specs() {
		ro, ok := want[s.Name]
		if !ok || s.ReadOnly != ro || s.Description == "" || len(s.Capabilities) == 0 {
			t.Errorf("spec %s: read-only %v, known %v", s.Name, s.ReadOnly, ok)
		}
		delete(want, s.Name)
	}
	if len(want) != 0 {
		t.Errorf("missing tools %v", want)
	}
}

// The unit pattern of the schemas (the pattern tags of the arguments) is
// the one opsUnit checks.
func TestOpsUnitSchemaPattern(t *testing.T) {
	for _, tl := range Tools(Config{}) {
		var s struct {
			Properties map[string]struct {
				Pattern string `json:"pattern"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(tl.Spec().InputSchema, &s); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"unit", "service"} {
			if p, ok := s.Properties[name]; ok && p.Pattern != unitPattern.String() {
				t.Errorf("%s: %s pattern %q, opsUnit checks %q", tl.Spec().Name, name, p.Pattern, unitPattern.String())
			}
		}
	}
}

func TestOpsUnitNames(t *testing.T) {
	tests := []struct{ in, want string }{
		{"nginx", "nginx.service"},
		{"nginx.service", "nginx.service"},
		{"getty@tty1.service", "getty@tty1.service"},
		{"systemd-fsck@dev-disk-by\\x2duuid-1.service", "systemd-fsck@dev-disk-by\\x2duuid-1.service"},
		{"docker.socket", "docker.socket"},
		{"foo.bar", "foo.bar.service"},
		{"apt-daily.timer", "apt-daily.timer"},
		{"-.mount", ""}, {"--help", ""}, {"-n", ""}, {"nginx*", ""}, {"ngin?", ""}, {"[ab]", ""},
		{"a b", ""}, {"a;b", ""}, {"a/b", ""}, {"a@b@c", ""}, {"", ""}, {"ä", ""}, {"a\nb", ""},
		{strings.Repeat("a", 250), ""},
	}
	for _, tt := range tests {
		got, err := opsUnit(tt.in)
		if tt.want == "" {
			if err == nil || err.Code != tool.CodeInvalidInput {
				t.Errorf("opsUnit(%q) = %q, %v; want INVALID_INPUT", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("opsUnit(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// The search path never yields a program from "." or a relative directory,
// whatever it says; the fixture directory first on it wins over the system.
func TestOpsSearchPath(t *testing.T) {
	fx := newFixture(t)
	dir := t.TempDir()
	tooltest.WriteFile(t, filepath.Join(dir, "journalctl"), "#!/bin/sh\necho planted\n", 0o755)
	tooltest.WriteFile(t, filepath.Join(dir, "rel", "journalctl"), "#!/bin/sh\necho planted\n", 0o755)
	tooltest.WriteFile(t, filepath.Join(dir, "noexec", "journalctl"), "#!/bin/sh\n", 0o644)
	t.Chdir(dir)
	empty := t.TempDir()
	for _, sp := range []string{".", "rel", ":.:rel:", "./rel:" + filepath.Join(dir, "noexec"), empty} {
		_, err := (&Config{SearchPath: sp}).lookPath("journalctl")
		if err == nil || err.Code != tool.CodeCommandNotFound || !strings.Contains(err.Hint, "systemd is not available") {
			t.Errorf("search path %q: %v", sp, err)
		}
	}
	got, err := (&Config{SearchPath: ".:" + fx.bin + ":/usr/bin"}).lookPath("systemctl")
	if err != nil || got != filepath.Join(fx.bin, "systemctl") {
		t.Errorf("lookPath = %q, %v", got, err)
	}
	if got := (&Config{SearchPath: ".:/a::rel:/b/"}).childPath(); got != "/a:/b" {
		t.Errorf("child PATH %q", got)
	}
	if (&Config{}).searchPath() != DefaultSearchPath || (&Config{}).timeout() != DefaultTimeout {
		t.Error("defaults")
	}
}

// Programs see a minimal environment: nothing of warden's own.
func TestOpsEnvironment(t *testing.T) {
	t.Setenv("OPS_TEST_API_TOKEN", tooltest.Canary)
	t.Setenv("LD_PRELOAD", "/tmp/evil.so")
	e := setup(t)
	tooltest.WantOK(t, e.call(t, "read_logs", `{"unit":"env.service"}`))
	env := tooltest.ReadFile(t, e.fx.envFile)
	if strings.Contains(env, tooltest.Canary) || strings.Contains(env, "LD_PRELOAD") || strings.Contains(env, "OPS_TEST") {
		t.Fatalf("environment leaked:\n%s", env)
	}
	allowed := map[string]bool{"PATH": true, "LC_ALL": true, "SYSTEMD_PAGER": true, "SYSTEMD_COLORS": true, "SYSTEMD_URLIFY": true,
		"PWD": true, "SHLVL": true, "_": true, "OLDPWD": true}
	for _, kv := range strings.Split(strings.TrimSpace(env), "\n") {
		k, _, _ := strings.Cut(kv, "=")
		if !allowed[k] {
			t.Errorf("unexpected variable %s", kv)
		}
	}
	if !strings.Contains(env, "PATH="+e.ops.SearchPath+"\n") || !strings.Contains(env, "PWD=/\n") {
		t.Errorf("environment:\n%s", env)
	}
}

// ---- read_logs ------------------------------------------------------------

func TestOpsReadLogs(t *testing.T) {
	e := setup(t)
	before := e.checksum(t)
	res := e.call(t, "read_logs", `{"unit":"nginx"}`)
	tooltest.WantOK(t, res)
	d := tooltest.Decode[Logs](t, res)
	jc := filepath.Join(e.fx.bin, "journalctl")
	wantArgv := []string{jc, "--no-pager", "--output=json", "--lines=100", "--unit=nginx.service"}
	if fmt.Sprint(d.Argv) != fmt.Sprint(wantArgv) {
		t.Errorf("argv %q, want %q", d.Argv, wantArgv)
	}
	if calls := e.fx.calls(t); len(calls) != 1 || calls[0] != jc+" [--no-pager] [--output=json] [--lines=100] [--unit=nginx.service]" {
		t.Errorf("ran %q", calls)
	}
	if d.Unit != "nginx.service" || d.Count != 3 || len(d.Entries) != 3 || d.Skipped != 1 || d.Truncated {
		t.Fatalf("data %+v", d)
	}
	e0, e1, e2 := d.Entries[0], d.Entries[1], d.Entries[2]
	if e0.Time != "2024-05-06T10:00:00.000000Z" || e0.Priority == nil || *e0.Priority != 6 || e0.PriorityName != "info" ||
		e0.Unit != "nginx.service" || e0.Identifier != "nginx" || e0.PID != 1234 || e0.Message != "started" || e0.Hostname != "web1" || e0.Cursor != "s=1" {
		t.Errorf("entry 0 %+v", e0)
	}
	if e1.Message != "hi\uFFFD" || *e1.Priority != 3 || e1.PriorityName != "err" {
		t.Errorf("binary message: %+v", e1)
	}
	if e2.Unit != "nginx.service" || e2.Identifier != "systemd" || !strings.Contains(e2.Message, "too large") || e2.PID != 0 {
		t.Errorf("entry 2 %+v", e2)
	}
	if !strings.Contains(res.Output, "2024-05-06T10:00:00.000000Z nginx[1234] <info>: started") || !hasWarning(res, "1 line of journalctl's output") {
		t.Errorf("output %q warnings %q", res.Output, res.Warnings)
	}

	// Filters, as separate --opt=value arguments.
	res = e.call(t, "read_logs", `{"unit":"nginx.service","lines":5,"since":"-1h","priority":"err"}`)
	tooltest.WantOK(t, res)
	if got := tooltest.Decode[Logs](t, res).Argv; fmt.Sprint(got[1:]) != "[--no-pager --output=json --lines=5 --since=-1h --priority=err --unit=nginx.service]" {
		t.Errorf("argv %q", got)
	}
	res = e.call(t, "read_logs", `{"unit":"nginx","since":"2024-05-01 10:00:00","priority":"3","lines":5000}`)
	tooltest.WantOK(t, res)
	if got := tooltest.Decode[Logs](t, res).Argv; got[3] != "--lines=5000" || got[4] != "--since=2024-05-01 10:00:00" || got[5] != "--priority=3" {
		t.Errorf("argv %q", got)
	}

	// No entries: success with a warning, and journalctl's stderr as a warning.
	res = e.call(t, "read_logs", `{"unit":"empty.service"}`)
	tooltest.WantOK(t, res)
	if d := tooltest.Decode[Logs](t, res); d.Count != 0 || d.Entries == nil || !hasWarning(res, "no journal entries") || !hasWarning(res, "not seeing messages") {
		t.Errorf("empty: %+v %q", d, res.Warnings)
	}

	// Read-only: a dry run reads the journal too and changes nothing.
	res = e.dryRun(t, "read_logs", `{"unit":"nginx"}`)
	tooltest.WantOK(t, res)
	if !res.DryRun || tooltest.Decode[Logs](t, res).Count != 3 || e.checksum(t) != before {
		t.Errorf("dry run %+v", res)
	}
}

func TestOpsReadLogsErrors(t *testing.T) {
	e := setup(t)
	tests := []struct {
		name, args string
		code       tool.Code
		substr     string
	}{
		{"option as unit", `{"unit":"-n"}`, tool.CodeInvalidInput, ""},
		{"long option as unit", `{"unit":"--output=cat"}`, tool.CodeInvalidInput, ""},
		{"glob", `{"unit":"ngin*"}`, tool.CodeInvalidInput, ""},
		{"space", `{"unit":"a b"}`, tool.CodeInvalidInput, ""},
		{"two @", `{"unit":"a@b@c"}`, tool.CodeInvalidInput, "not a valid unit name"},
		{"zero lines", `{"unit":"nginx","lines":0}`, tool.CodeInvalidInput, ""},
		{"too many lines", `{"unit":"nginx","lines":5001}`, tool.CodeInvalidInput, ""},
		{"since with quote", `{"unit":"nginx","since":"'; rm -rf /"}`, tool.CodeInvalidInput, ""},
		{"bad priority", `{"unit":"nginx","priority":"loud"}`, tool.CodeInvalidInput, ""},
		{"unknown field", `{"unit":"nginx","follow":true}`, tool.CodeInvalidInput, ""},
		{"case variant", `{"Unit":"nginx"}`, tool.CodeInvalidInput, ""},
		{"journalctl fails", `{"unit":"broken"}`, tool.CodeCommandFailed, "exited with status 1: Failed to open journal: boom"},
		{"timeout", `{"unit":"slow"}`, tool.CodeCommandTimeout, "did not finish in time (at most 300ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.timeoutFor(tt.code)
			wantErr(t, e.call(t, "read_logs", tt.args), tt.code, tt.substr)
		})
	}

	// Argument errors are found before anything runs.
	for _, c := range e.fx.calls(t) {
		if !strings.Contains(c, "broken.service") && !strings.Contains(c, "slow.service") {
			t.Errorf("ran %q", c)
		}
	}

	// No grant.
	e.gate(t, "version: 1\ngrants: [\"fs.read:**\"]\n")
	wantErr(t, e.call(t, "read_logs", `{"unit":"nginx"}`), tool.CodeCapabilityDenied, "needs the grant exec:journalctl")

	// No journalctl on this machine.
	e.ops.SearchPath = t.TempDir()
	e.gate(t, e.policy())
	wantErr(t, e.call(t, "read_logs", `{"unit":"nginx"}`), tool.CodeCommandNotFound, "systemd is not available here")
}

// An output flood is cut at the cap and marked; a journalctl that prints
// more entries than asked for is cut to the most recent ones.
func TestOpsReadLogsFlood(t *testing.T) {
	e := setup(t)
	res := e.call(t, "read_logs", `{"unit":"flood"}`)
	tooltest.WantOK(t, res)
	d := tooltest.Decode[Logs](t, res)
	if !d.Truncated || d.Count != 0 || !hasWarning(res, "more than 16 MiB") || len(res.Output) > 1000 {
		t.Fatalf("truncated %v count %d skipped %d warnings %q", d.Truncated, d.Count, d.Skipped, res.Warnings)
	}
	res = e.call(t, "read_logs", `{"unit":"many","lines":100}`)
	tooltest.WantOK(t, res)
	d = tooltest.Decode[Logs](t, res)
	if !d.Truncated || d.Count != 100 || d.Entries[0].Message != "m201" || d.Entries[99].Message != "m300" || !hasWarning(res, "300 entries") {
		t.Fatalf("truncated %v count %d warnings %q", d.Truncated, d.Count, res.Warnings)
	}
}

// ---- service_status -------------------------------------------------------

func TestOpsServiceStatus(t *testing.T) {
	e := setup(t)
	before := e.checksum(t)
	res := e.call(t, "service_status", `{"unit":"nginx"}`)
	tooltest.WantOK(t, res)
	st := tooltest.Decode[ServiceStatus](t, res)
	sc := filepath.Join(e.fx.bin, "systemctl")
	wantCall := sc + " [show] [--no-pager] [--property=Id,Description,LoadState,LoadError,ActiveState,SubState,UnitFileState,MainPID," +
		"ExecMainStatus,Result,NRestarts,ActiveEnterTimestamp,StateChangeTimestamp,MemoryCurrent,FragmentPath] [--] [nginx.service]"
	if calls := e.fx.calls(t); len(calls) != 1 || calls[0] != wantCall {
		t.Errorf("ran %q\nwant %q", calls, wantCall)
	}
	if st.Unit != "nginx.service" || st.ID != "nginx.service" || st.LoadState != "loaded" || st.ActiveState != "active" || st.SubState != "running" ||
		st.UnitFileState != "enabled" || st.MainPID != 100 || st.NRestarts != 2 || st.Result != "success" || st.MemoryCurrentBytes == nil ||
		*st.MemoryCurrentBytes != 4096 || st.FragmentPath != "/lib/systemd/system/nginx.service" || st.Properties["Description"] != "Fixture nginx.service" ||
		st.ActiveEnterTimestamp != "Mon 2024-05-06 10:00:00 UTC" || st.Argv[0] != sc {
		t.Errorf("status %+v", st)
	}
	if res.Output != "nginx.service: active (running), main pid 100, loaded (enabled), active since Mon 2024-05-06 10:00:00 UTC" {
		t.Errorf("output %q", res.Output)
	}
	// The seed's argument name.
	res = e.call(t, "service_status", `{"service":"docker.socket"}`)
	tooltest.WantOK(t, res)
	if st := tooltest.Decode[ServiceStatus](t, res); st.Unit != "docker.socket" {
		t.Errorf("service: %+v", st)
	}
	// systemd's \x2d escapes and template instances pass the schema.
	res = e.call(t, "service_status", opsArgs("unit", `systemd-fsck@dev-disk-by\x2duuid-1`))
	tooltest.WantOK(t, res)
	if st := tooltest.Decode[ServiceStatus](t, res); st.Unit != `systemd-fsck@dev-disk-by\x2duuid-1.service` {
		t.Errorf("escaped: %+v", st)
	}
	// Read-only: a dry run shows the status and changes nothing.
	res = e.dryRun(t, "service_status", `{"unit":"nginx"}`)
	tooltest.WantOK(t, res)
	if e.checksum(t) != before || e.fx.restarts(t) != 0 {
		t.Error("dry run changed something")
	}
}

func TestOpsServiceStatusErrors(t *testing.T) {
	e := setup(t)
	tests := []struct {
		name, args string
		code       tool.Code
		substr     string
	}{
		{"no unit", `{}`, tool.CodeInvalidInput, ""},
		{"unit and service", `{"unit":"a","service":"b"}`, tool.CodeInvalidInput, ""},
		{"option", `{"unit":"--all"}`, tool.CodeInvalidInput, ""},
		{"glob", `{"service":"*"}`, tool.CodeInvalidInput, ""},
		{"unknown unit", `{"unit":"missing"}`, tool.CodeNotFound, "missing.service is not known to systemd"},
		{"no systemd", `{"unit":"nosystemd"}`, tool.CodeCommandFailed, "systemd is not running"},
		{"unexpected output", `{"unit":"garbage"}`, tool.CodeCommandFailed, "no LoadState"},
		{"timeout", `{"unit":"slow"}`, tool.CodeCommandTimeout, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.timeoutFor(tt.code)
			wantErr(t, e.call(t, "service_status", tt.args), tt.code, tt.substr)
		})
	}
	res := e.call(t, "service_status", `{"unit":"nosystemd"}`)
	if !strings.Contains(res.Error.Message, "exited with status 1: System has not been booted with systemd") {
		t.Errorf("%+v", res.Error)
	}
	e.gate(t, "version: 1\ngrants: [\"exec:journalctl\"]\n")
	wantErr(t, e.call(t, "service_status", `{"unit":"nginx"}`), tool.CodeCapabilityDenied, "needs the grant exec:systemctl")
	e.ops.SearchPath = t.TempDir()
	e.gate(t, e.policy())
	wantErr(t, e.call(t, "service_status", `{"unit":"nginx"}`), tool.CodeCommandNotFound, "systemd")
}

// ---- restart_service ------------------------------------------------------

func TestOpsRestartService(t *testing.T) {
	e := setup(t)
	sc := filepath.Join(e.fx.bin, "systemctl")
	res := e.call(t, "restart_service", `{"unit":"nginx"}`)
	tooltest.WantOK(t, res)
	d := tooltest.Decode[Restart](t, res)
	if !d.Restarted || d.Unit != "nginx.service" || fmt.Sprint(d.Argv) != fmt.Sprint([]string{sc, "restart", "--no-ask-password", "--", "nginx.service"}) ||
		d.Before.MainPID != 100 || d.After == nil || d.After.MainPID != 101 {
		t.Fatalf("data %+v", d)
	}
	if e.fx.pid(t) != "101" || e.fx.restarts(t) != 1 {
		t.Errorf("pid %s restarts %d", e.fx.pid(t), e.fx.restarts(t))
	}
	// dry_run_first: the preview's status, then the run's status, restart, status.
	calls := e.fx.calls(t)
	if len(calls) != 4 || !strings.Contains(calls[0], "[show]") || !strings.Contains(calls[1], "[show]") ||
		calls[2] != sc+" [restart] [--no-ask-password] [--] [nginx.service]" || !strings.Contains(calls[3], "[show]") {
		t.Errorf("ran %q", calls)
	}
	if !hasWarning(res, "restarts nginx.service") || !strings.Contains(res.Output, "before: nginx.service: active (running), main pid 100") ||
		!strings.Contains(res.Output, "after:  nginx.service: active (running), main pid 101") {
		t.Errorf("output %q warnings %q", res.Output, res.Warnings)
	}
	// The audit's intent record holds the preview shown before approval.
	if tooltest.Count(e.audit, "would run: "+sc+" restart --no-ask-password -- nginx.service") != 1 {
		t.Errorf("audit has no preview: %q", tooltest.Events(e.audit))
	}
	// The seed's argument name; critical units are called out.
	res = e.call(t, "restart_service", `{"service":"sshd"}`)
	tooltest.WantOK(t, res)
	if !hasWarning(res, "critical") || e.fx.restarts(t) != 2 {
		t.Errorf("sshd: %q", res.Warnings)
	}
}

func TestOpsRestartServiceDryRun(t *testing.T) {
	e := setup(t)
	sc := filepath.Join(e.fx.bin, "systemctl")
	before := e.checksum(t)
	res := e.dryRun(t, "restart_service", `{"unit":"nginx.service"}`)
	tooltest.WantOK(t, res)
	d := tooltest.Decode[Restart](t, res)
	if !res.DryRun || d.Restarted || d.After != nil || d.Before.MainPID != 100 ||
		fmt.Sprint(d.Argv) != fmt.Sprint([]string{sc, "restart", "--no-ask-password", "--", "nginx.service"}) {
		t.Fatalf("%+v", d)
	}
	if want := "would run: " + sc + " restart --no-ask-password -- nginx.service\ncurrent state: nginx.service: active (running), main pid 100"; !strings.HasPrefix(res.Output, want) {
		t.Errorf("output %q\nwant %q", res.Output, want)
	}
	if !hasWarning(res, "dry run: nothing was changed") || !hasWarning(res, "restarts nginx.service") {
		t.Errorf("warnings %q", res.Warnings)
	}
	if e.checksum(t) != before || e.fx.restarts(t) != 0 {
		t.Fatalf("the dry run restarted: %q", e.fx.calls(t))
	}
	for _, c := range e.fx.calls(t) {
		if !strings.HasPrefix(c, sc+" [show]") {
			t.Errorf("dry run ran %q", c)
		}
	}
	// The preview reports a unit that does not exist, and restarts nothing.
	wantErr(t, e.dryRun(t, "restart_service", `{"unit":"missing"}`), tool.CodeNotFound, "")
	if e.fx.restarts(t) != 0 {
		t.Fatal("restarted")
	}
}

func TestOpsRestartServiceErrors(t *testing.T) {
	e := setup(t)
	tests := []struct {
		name, args string
		code       tool.Code
		substr     string
	}{
		{"option", `{"unit":"-H"}`, tool.CodeInvalidInput, ""},
		{"glob restarts everything", `{"unit":"*.service"}`, tool.CodeInvalidInput, ""},
		{"both names", `{"unit":"a","service":"a"}`, tool.CodeInvalidInput, ""},
		{"unknown unit", `{"unit":"missing"}`, tool.CodeNotFound, "not known to systemd"},
		{"restart fails", `{"unit":"failing"}`, tool.CodeCommandFailed, "exited with status 1: Job for failing.service failed"},
		{"restart hangs", `{"unit":"slowrestart"}`, tool.CodeCommandTimeout, "did not finish"},
		{"no systemd", `{"unit":"nosystemd"}`, tool.CodeCommandFailed, "systemd is not running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.timeoutFor(tt.code)
			wantErr(t, e.call(t, "restart_service", tt.args), tt.code, tt.substr)
		})
	}
	// Only the two that exist and fail were restarted.
	if n := e.fx.restarts(t); n != 2 {
		t.Errorf("restarts %d: %q", n, e.fx.calls(t))
	}

	// Approval: the default rule requires it; with no one to approve, the
	// preview is recorded and nothing restarts.
	p, err := policy.ParsePolicy("test", []byte(e.policy()))
	if err != nil {
		t.Fatal(err)
	}
	audit := &runtimetest.Audit{}
	reg := gate.NewRegistry()
	if err := reg.Register(e.ops.tools()...); err != nil {
		t.Fatal(err)
	}
	g, err := gate.NewGate(gate.GateOptions{Registry: reg, Policy: p, Workspace: e.ws, Audit: audit, Approval: tool.ApproveNever})
	if err != nil {
		t.Fatal(err)
	}
	res := tooltest.Call(t, g, "restart_service", `{"unit":"nginx"}`)
	wantErr(t, res, tool.CodeApprovalRequired, "")
	if e.fx.restarts(t) != 2 || e.fx.pid(t) != "100" {
		t.Error("restarted without approval")
	}
	// The built-in default policy has the rule, and no exec grant.
	g, err = gate.NewGate(gate.GateOptions{Registry: reg, Policy: policy.DefaultPolicy(), Workspace: e.ws, Audit: audit, Approval: tool.ApproveAuto})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, tooltest.Call(t, g, "restart_service", `{"unit":"nginx"}`), tool.CodeCapabilityDenied, "needs the grant exec:systemctl")
	var r *policy.Rule
	for i, x := range policy.DefaultPolicy().Rules {
		if x.Tool == "restart_service" {
			r = &policy.DefaultPolicy().Rules[i]
			break
		}
	}
	if r == nil || !r.RequireApproval || !r.DryRunFirst {
		t.Errorf("default rule %+v", r)
	}

	e.ops.SearchPath = t.TempDir()
	e.gate(t, e.policy())
	wantErr(t, e.call(t, "restart_service", `{"unit":"nginx"}`), tool.CodeCommandNotFound, "systemd is not available")
	wantErr(t, e.dryRun(t, "restart_service", `{"unit":"nginx"}`), tool.CodeCommandNotFound, "systemd is not available")
}

// ---- read_config ----------------------------------------------------------

func TestOpsReadConfig(t *testing.T) {
	e := setup(t)
	before := e.checksum(t)
	res := e.call(t, "read_config", `{"path":"conf/app.conf"}`)
	tooltest.WantOK(t, res)
	d := tooltest.Decode[ConfigFile](t, res)
	sum := sha256.Sum256([]byte(appConf))
	if d.Path != filepath.Join(e.ws, "conf", "app.conf") || d.Content != appConf || d.Lines != 4 || d.Bytes != len(appConf) ||
		d.Mode != "0640" || d.SHA256 != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("data %+v", d)
	}
	if !strings.Contains(res.Output, "     3\tworkers 1\n") {
		t.Errorf("output %q", res.Output)
	}

	// An absolute path under a granted absolute base.
	nginx := filepath.Join(e.abs, "etc", "nginx", "nginx.conf")
	res = e.call(t, "read_config", opsArgs("path", nginx))
	tooltest.WantOK(t, res)
	if d := tooltest.Decode[ConfigFile](t, res); d.Content != nginxConf || d.Path != nginx || d.Lines != 3 {
		t.Errorf("absolute: %+v", d)
	}
	// A symlink inside the granted tree is followed to its target.
	if err := os.Symlink("app.conf", filepath.Join(e.ws, "conf", "alias.conf")); err != nil {
		t.Fatal(err)
	}
	res = e.call(t, "read_config", `{"path":"conf/alias.conf"}`)
	tooltest.WantOK(t, res)
	if d := tooltest.Decode[ConfigFile](t, res); d.Path != filepath.Join(e.ws, "conf", "app.conf") {
		t.Errorf("symlink: %+v", d)
	}
	// CRLF and no final newline.
	tooltest.WriteFile(t, filepath.Join(e.ws, "crlf.ini"), "[a]\r\nb=1", 0o644)
	res = e.call(t, "read_config", `{"path":"crlf.ini"}`)
	tooltest.WantOK(t, res)
	if d := tooltest.Decode[ConfigFile](t, res); d.Lines != 2 || d.Content != "[a]\r\nb=1" || !strings.Contains(res.Output, "     1\t[a]\n     2\tb=1\n") {
		t.Errorf("crlf: %+v %q", d, res.Output)
	}
	before = e.checksum(t)
	res = e.dryRun(t, "read_config", `{"path":"conf/app.conf"}`)
	tooltest.WantOK(t, res)
	if e.checksum(t) != before {
		t.Error("dry run changed something")
	}
}

func TestOpsReadConfigErrors(t *testing.T) {
	e := setup(t)
	conf := filepath.Join(e.ws, "conf")
	tooltest.WriteFile(t, filepath.Join(conf, "bin.conf"), "a\x00b\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(conf, "latin1.conf"), "caf\xe9\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(conf, "big.conf"), strings.Repeat("x", maxConfigBytes+1), 0o644)
	if err := syscall.Mkfifo(filepath.Join(conf, "fifo.conf"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(e.outside, "secret.conf"), filepath.Join(conf, "hardlink.conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(e.outside, "secret.conf"), filepath.Join(conf, "out.conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop2.conf", filepath.Join(conf, "loop1.conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop1.conf", filepath.Join(conf, "loop2.conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/null", filepath.Join(conf, "devnull.conf")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		code       tool.Code
		substr     string
	}{
		{"missing", "conf/nope.conf", tool.CodeNotFound, "does not exist"},
		{"missing dir", "nodir/x.conf", tool.CodeNotFound, "does not exist"},
		{"file as dir", "conf/app.conf/x", tool.CodeNotFound, ""},
		{"directory", "conf", tool.CodeInvalidInput, "is a directory"},
		{"workspace", ".", tool.CodeInvalidInput, "is a directory"},
		{"fifo", "conf/fifo.conf", tool.CodeInvalidInput, "named pipe"},
		{"binary", "conf/bin.conf", tool.CodeNotText, ""},
		{"not utf-8", "conf/latin1.conf", tool.CodeNotText, ""},
		{"too large", "conf/big.conf", tool.CodeTooLarge, ""},
		{"hard link", "conf/hardlink.conf", tool.CodePathEscape, "hard links"},
		{"symlink out", "conf/out.conf", tool.CodeCapabilityDenied, ""},
		{"dot dot", "../" + filepath.Base(e.outside) + "/secret.conf", tool.CodeCapabilityDenied, ""},
		{"absolute ungranted", filepath.Join(e.outside, "secret.conf"), tool.CodeCapabilityDenied, "needs the grant fs.read:" + e.outside},
		{"etc", "/etc/passwd", tool.CodeCapabilityDenied, ""},
		{"symlink to device", "conf/devnull.conf", tool.CodeCapabilityDenied, ""},
		{"symlink loop", "conf/loop1.conf", tool.CodeInvalidInput, "symbolic links"},
		{"NUL", "conf/app.conf\x00.txt", tool.CodeInvalidInput, ""},
		{"5000-byte path", strings.Repeat("a/", 2500), tool.CodeInvalidInput, ""},
		{"empty", "", tool.CodeInvalidInput, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.call(t, "read_config", opsArgs("path", tt.path))
			wantErr(t, res, tt.code, tt.substr)
			if strings.Contains(res.Output+string(res.Data), "OUTSIDE SECRET") {
				t.Fatal("leaked the outside file")
			}
		})
	}
	// Through a gate whose grants do allow /dev/null, a device is still not a config file.
	e.gate(t, e.policy("fs.read:/dev/null"))
	wantErr(t, e.call(t, "read_config", `{"path":"/dev/null"}`), tool.CodeInvalidInput, "character device")
	// Files warden's user may not read: a file, and a directory on the path.
	// As root (the tests run as root here) the call runs on a thread without
	// the capabilities that bypass file permissions, so it is refused the
	// same way.
	tooltest.WriteFile(t, filepath.Join(conf, "private.conf"), "x\n", 0o000)
	tooltest.WriteFile(t, filepath.Join(conf, "locked", "x.conf"), "x\n", 0o644)
	if err := os.Chmod(filepath.Join(conf, "locked"), 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(conf, "locked"), 0o755) })
	for _, tt := range []struct{ path, substr string }{
		{"conf/private.conf", "permission denied"},
		{"conf/locked/x.conf", "cannot search a directory"},
	} {
		res := callWithoutDAC(t, e.g, gate.Request{Tool: "read_config", Args: json.RawMessage(opsArgs("path", tt.path)), Principal: []string{"test"}})
		wantErr(t, res, tool.CodeToolError, tt.substr)
		if res.Error.Hint == "" {
			t.Errorf("%s: TOOL_ERROR without a hint", tt.path)
		}
	}
}

// callWithoutDAC makes a gate call that file permissions apply to, even
// as root: it runs on an OS thread of its own whose effective capabilities
// lack CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (capabilities are per
// thread on Linux). The thread is never unlocked, so it ends with the
// goroutine and the capabilities of the rest of the process are untouched.
func callWithoutDAC(t *testing.T, g *gate.Gate, req gate.Request) tool.Result {
	t.Helper()
	type answer struct {
		res tool.Result
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		goruntime.LockOSThread() // no unlock: the thread exits with the goroutine
		if os.Getuid() == 0 {
			hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
			var data [2]unix.CapUserData
			if err := unix.Capget(&hdr, &data[0]); err != nil {
				ch <- answer{err: fmt.Errorf("capget: %w", err)}
				return
			}
			data[0].Effective &^= 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH
			if err := unix.Capset(&hdr, &data[0]); err != nil {
				ch <- answer{err: fmt.Errorf("capset: %w", err)}
				return
			}
		}
		res, err := g.Call(context.Background(), req)
		ch <- answer{res, err}
	}()
	a := <-ch
	if a.err != nil {
		t.Fatal(a.err)
	}
	return a.res
}

// The opened directory and file are checked against the resolved path: a
// root or file that is not what was resolved is refused.
func TestOpsOpenVerifiesRealPath(t *testing.T) {
	e := setup(t)
	conf := filepath.Join(e.ws, "conf")
	root, err := os.OpenRoot(conf)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := checkReal(root, conf); err != nil {
		t.Fatal(err)
	}
	if err := checkReal(root, e.ws); err == nil || err.Code != tool.CodePathEscape {
		t.Fatalf("%v", err)
	}
	tg := &opsTarget{path: filepath.Join(e.outside, "app.conf"), dir: root, name: "app.conf"}
	if _, err := tg.read("app.conf"); err == nil || err.Code != tool.CodePathEscape {
		t.Fatalf("%v", err)
	}
}

// A file, or a directory on the path, swapped between the real thing and a
// symlink out of the granted tree while read_config and modify_config run:
// the outside files are never read nor written.
func TestOpsConfigSymlinkRace(t *testing.T) {
	attempts := 5000 // per case: 10,000 in all
	if testing.Short() {
		attempts = 500
	}
	tests := []struct {
		name string
		path string // relative to the workspace
		// setup prepares the tree and returns one swap step.
		setup func(t *testing.T, e *opsEnv) func(i int)
	}{
		{"file", "conf/race.conf", func(t *testing.T, e *opsEnv) func(int) {
			conf := filepath.Join(e.ws, "conf")
			target := filepath.Join(conf, "race.conf")
			tooltest.WriteFile(t, target, "inside\n", 0o644)
			return func(i int) {
				l, r := filepath.Join(conf, fmt.Sprintf(".l%d", i)), filepath.Join(conf, fmt.Sprintf(".r%d", i))
				_ = os.Symlink(filepath.Join(e.outside, "race.conf"), l)
				_ = os.Rename(l, target)
				_ = os.WriteFile(r, []byte("inside\n"), 0o644)
				_ = os.Rename(r, target)
			}
		}},
		{"directory", "conf/d/race.conf", func(t *testing.T, e *opsEnv) func(int) {
			d, link := filepath.Join(e.ws, "conf", "d"), filepath.Join(e.ws, "conf", "dlink")
			tooltest.WriteFile(t, filepath.Join(d, "race.conf"), "inside\n", 0o644)
			if err := os.Symlink(e.outside, link); err != nil {
				t.Fatal(err)
			}
			return func(int) { // atomically exchange the directory and the symlink
				_ = unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t)
			outsideFile := filepath.Join(e.outside, "race.conf")
			tooltest.WriteFile(t, outsideFile, "OUTSIDE\n", 0o644)
			swap := tt.setup(t, e)
			var stop atomic.Bool
			var wg sync.WaitGroup
			t.Cleanup(func() { stop.Store(true); wg.Wait() })
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; !stop.Load(); i++ {
					swap(i)
				}
			}()
			var ok int
			refused := map[tool.Code]int{}
			for i := 0; i < attempts; i++ {
				var res tool.Result
				if i%5 == 4 {
					res = e.call(t, "modify_config", opsArgs("path", tt.path, "changes", []ConfigChange{{1, "inside", "written"}}))
				} else {
					res = e.call(t, "read_config", opsArgs("path", tt.path))
				}
				if strings.Contains(res.Output+string(res.Data), "OUTSIDE") {
					t.Fatalf("escape on attempt %d: %s", i, res.Output)
				}
				if res.Success {
					ok++
					continue
				}
				switch res.Error.Code {
				case tool.CodeCapabilityDenied, tool.CodePathEscape, tool.CodeNotFound, tool.CodeInvalidInput, tool.CodePatchRejected:
					refused[res.Error.Code]++
				default:
					t.Fatalf("attempt %d: %+v", i, res.Error)
				}
			}
			stop.Store(true)
			wg.Wait()
			if got := tooltest.ReadFile(t, outsideFile); got != "OUTSIDE\n" {
				t.Fatalf("outside file changed: %q", got)
			}
			if ents, _ := os.ReadDir(e.outside); len(ents) != 2 {
				t.Fatalf("outside directory changed: %v", ents)
			}
			t.Logf("%d attempts: %d succeeded, refused %v, 0 escapes", attempts, ok, refused)
		})
	}
}

// ---- modify_config --------------------------------------------------------

func TestOpsModifyConfig(t *testing.T) {
	e := setup(t)
	app := filepath.Join(e.ws, "conf", "app.conf")
	res := e.call(t, "modify_config", `{"path":"conf/app.conf","changes":[{"line":3,"old":"workers 1","new":"workers 4"}]}`)
	tooltest.WantOK(t, res)
	d := tooltest.Decode[ConfigEdit](t, res)
	wantDiff := "--- " + app + "\n+++ " + app + "\n@@ -1,4 +1,4 @@\n # app\n listen 80\n-workers 1\n+workers 4\n log /var/log/app.log\n"
	if d.Diff != wantDiff {
		t.Errorf("diff\n%s\nwant\n%s", d.Diff, wantDiff)
	}
	if got := tooltest.ReadFile(t, app); got != "# app\nlisten 80\nworkers 4\nlog /var/log/app.log\n" {
		t.Errorf("file %q", got)
	}
	fi, err := os.Stat(app)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v %v", fi.Mode(), err)
	}
	if old, ok := e.arts.get(d.Artifact); !ok || string(old) != appConf || d.ArtifactRedacted {
		t.Errorf("artifact %s: %q %v", d.Artifact, old, ok)
	}
	if !d.Written || d.Path != app || fmt.Sprint(d.ChangedLines) != "[3]" || d.Mode != "0640" || d.Bytes != len(appConf) {
		t.Errorf("data %+v", d)
	}
	if !strings.Contains(res.Output, "changed 1 line of "+app+" (line 3); the old version is kept as artifact "+d.Artifact) {
		t.Errorf("output %q", res.Output)
	}
	// No temporary file is left behind.
	if ents, _ := os.ReadDir(filepath.Dir(app)); len(ents) != 1 {
		t.Errorf("directory holds %v", ents)
	}
	// The audit's intent record holds the diff shown before approval.
	if tooltest.Count(e.audit, "+workers 4") == 0 {
		t.Error("no preview in the audit")
	}

	// An absolute path in a granted base; several changes, several hunks,
	// a line that becomes two; the owner is kept.
	nginx := filepath.Join(e.abs, "etc", "nginx", "nginx.conf")
	long := "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\nl11\nl12\n"
	tooltest.WriteFile(t, nginx, long, 0o600)
	if os.Getuid() == 0 {
		if err := os.Chown(nginx, 1234, 5678); err != nil {
			t.Fatal(err)
		}
	}
	res = e.call(t, "modify_config", opsArgs("path", nginx, "changes", []ConfigChange{
		{Line: 12, Old: "l12", New: "L12"}, {Line: 1, Old: "l1", New: "L1a\nL1b"},
	}))
	tooltest.WantOK(t, res)
	d = tooltest.Decode[ConfigEdit](t, res)
	wantDiff = "--- " + nginx + "\n+++ " + nginx + "\n" +
		"@@ -1,4 +1,5 @@\n-l1\n+L1a\n+L1b\n l2\n l3\n l4\n" +
		"@@ -9,4 +10,4 @@\n l9\n l10\n l11\n-l12\n+L12\n"
	if d.Diff != wantDiff || fmt.Sprint(d.ChangedLines) != "[1 12]" {
		t.Errorf("diff\n%s\nwant\n%s", d.Diff, wantDiff)
	}
	if got := tooltest.ReadFile(t, nginx); got != "L1a\nL1b\nl2\nl3\nl4\nl5\nl6\nl7\nl8\nl9\nl10\nl11\nL12\n" {
		t.Errorf("file %q", got)
	}
	fi, _ = os.Stat(nginx)
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o600 || (os.Getuid() == 0 && (st.Uid != 1234 || st.Gid != 5678)) {
		t.Errorf("mode %v owner %d:%d", fi.Mode(), st.Uid, st.Gid)
	}
	if old, _ := e.arts.get(d.Artifact); string(old) != long {
		t.Errorf("artifact %q", old)
	}

	// Changes that match the file already: nothing written, no artifact.
	n := e.arts.len()
	before := e.checksum(t)
	res = e.call(t, "modify_config", `{"path":"conf/app.conf","changes":[{"line":1,"old":"# app","new":"# app"}]}`)
	tooltest.WantOK(t, res)
	if d := tooltest.Decode[ConfigEdit](t, res); d.Written || d.Artifact != "" || len(d.ChangedLines) != 0 || !hasWarning(res, "nothing to write") {
		t.Errorf("no-op %+v", d)
	}
	if e.checksum(t) != before || e.arts.len() != n {
		t.Error("no-op wrote")
	}
}

// The diffs modify_config shows apply with patch(1) to the old file and give
// exactly the new one.
func TestOpsModifyConfigDiffApplies(t *testing.T) {
	patch, err := exec.LookPath("patch")
	if err != nil {
		t.Skip("no patch(1)")
	}
	tests := []struct {
		name, old string
		changes   []ConfigChange
		want      string
	}{
		{"middle", "a\nb\nc\n", []ConfigChange{{2, "b", "B"}}, "a\nB\nc\n"},
		{"no final newline, last line", "a\nb\nc", []ConfigChange{{3, "c", "C"}}, "a\nb\nC"},
		{"no final newline, context", "a\nb\nc", []ConfigChange{{1, "a", "A"}}, "A\nb\nc"},
		{"one line", "x", []ConfigChange{{1, "x", "y\nz"}}, "y\nz"},
		{"crlf", "[s]\r\nk=1\r\nj=2\r\n", []ConfigChange{{2, "k=1", "k=2\nk2=3"}}, "[s]\r\nk=2\r\nk2=3\r\nj=2\r\n"},
		{"empty line", "a\n\nb\n", []ConfigChange{{2, "", "# was empty"}}, "a\n# was empty\nb\n"},
		{"line to empty", "a\nb\n", []ConfigChange{{1, "a", ""}}, "\nb\n"},
		{"adjacent hunks merge", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", []ConfigChange{{1, "1", "one"}, {8, "8", "eight"}}, "one\n2\n3\n4\n5\n6\n7\neight\n9\n"},
		{"far hunks", strings.Repeat("x\n", 30), []ConfigChange{{2, "x", "y"}, {29, "x", "z"}},
			"x\ny\n" + strings.Repeat("x\n", 26) + "z\nx\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t)
			p := filepath.Join(e.ws, "conf", "t.conf")
			tooltest.WriteFile(t, p, tt.old, 0o644)
			res := e.call(t, "modify_config", opsArgs("path", "conf/t.conf", "changes", tt.changes))
			tooltest.WantOK(t, res)
			if got := tooltest.ReadFile(t, p); got != tt.want {
				t.Fatalf("file %q, want %q", got, tt.want)
			}
			d := tooltest.Decode[ConfigEdit](t, res)
			dir := t.TempDir()
			tooltest.WriteFile(t, filepath.Join(dir, "old"), tt.old, 0o644)
			cmd := exec.Command(patch, "-s", "-o", filepath.Join(dir, "new"), filepath.Join(dir, "old"))
			cmd.Stdin = strings.NewReader(d.Diff)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("patch: %v\n%s\ndiff:\n%s", err, out, d.Diff)
			}
			if got := tooltest.ReadFile(t, filepath.Join(dir, "new")); got != tt.want {
				t.Fatalf("patched %q, want %q\ndiff:\n%s", got, tt.want, d.Diff)
			}
		})
	}
}

func TestOpsModifyConfigDryRun(t *testing.T) {
	e := setup(t)
	app := filepath.Join(e.ws, "conf", "app.conf")
	before := e.checksum(t)
	res := e.dryRun(t, "modify_config", `{"path":"conf/app.conf","changes":[{"line":2,"old":"listen 80","new":"listen 8080"}]}`)
	tooltest.WantOK(t, res)
	d := tooltest.Decode[ConfigEdit](t, res)
	sum := sha256.Sum256([]byte(appConf))
	if d.Written || d.Artifact != "sha256:"+hex.EncodeToString(sum[:]) || !strings.Contains(d.Diff, "-listen 80\n+listen 8080\n") {
		t.Errorf("preview %+v", d)
	}
	if !strings.HasPrefix(res.Output, "would change 1 line of "+app+" (line 2; "+fmt.Sprint(len(appConf)+2)+" bytes, mode 0640 kept)") ||
		!strings.Contains(res.Output, "+listen 8080") {
		t.Errorf("output %q", res.Output)
	}
	if e.checksum(t) != before || e.arts.len() != 0 {
		t.Fatal("the dry run changed something")
	}
	// A stale change is reported by the dry run too.
	wantErr(t, e.dryRun(t, "modify_config", `{"path":"conf/app.conf","changes":[{"line":2,"old":"listen 81","new":"x"}]}`), tool.CodePatchRejected, "")
	if e.checksum(t) != before {
		t.Fatal("changed")
	}
}

func TestOpsModifyConfigErrors(t *testing.T) {
	e := setup(t)
	conf := filepath.Join(e.ws, "conf")
	tooltest.WriteFile(t, filepath.Join(conf, "bin.conf"), "a\x00b\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(conf, "big.conf"), strings.Repeat("x\n", maxConfigBytes/2+1), 0o644)
	if err := syscall.Mkfifo(filepath.Join(conf, "fifo.conf"), 0o644); err != nil {
		t.Fatal(err)
	}
	tooltest.WriteFile(t, filepath.Join(e.outside, "other.conf"), "a\n", 0o644)
	if err := os.Link(filepath.Join(e.outside, "other.conf"), filepath.Join(conf, "hardlink.conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(e.outside, "other.conf"), filepath.Join(conf, "out.conf")); err != nil {
		t.Fatal(err)
	}
	tooltest.WriteFile(t, filepath.Join(e.ws, "readme.txt"), "a\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(e.ws, ".git", "config"), "[core]\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(e.ws, ".warden", "policy.yaml"), "version: 1\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(e.ws, "conf", ".git", "hooks", "pre-commit"), "#!/bin/sh\n", 0o755)
	ch := func(line int, old, new string) string {
		b, _ := json.Marshal([]ConfigChange{{line, old, new}})
		return string(b)
	}
	tests := []struct {
		name, args string
		code       tool.Code
		substr     string
	}{
		{"stale line", `{"path":"conf/app.conf","changes":` + ch(3, "workers 2", "workers 4") + `}`, tool.CodePatchRejected, `line 3 reads "workers 1", not "workers 2"`},
		{"past the end", `{"path":"conf/app.conf","changes":` + ch(9, "x", "y") + `}`, tool.CodePatchRejected, "only 4 lines"},
		{"one of two stale", `{"path":"conf/app.conf","changes":[{"line":1,"old":"# app","new":"# App"},{"line":2,"old":"listen 81","new":"listen 82"}]}`, tool.CodePatchRejected, "1 change refused"},
		{"same line twice", `{"path":"conf/app.conf","changes":[{"line":1,"old":"# app","new":"a"},{"line":1,"old":"# app","new":"b"}]}`, tool.CodeInvalidInput, "changed twice"},
		{"newline in old", `{"path":"conf/app.conf","changes":` + ch(1, "# app\nlisten 80", "x") + `}`, tool.CodeInvalidInput, "old holds a newline"},
		{"NUL in new", `{"path":"conf/app.conf","changes":` + ch(1, "# app", "a\x00") + `}`, tool.CodeInvalidInput, "NUL"},
		{"line 0", `{"path":"conf/app.conf","changes":` + ch(0, "", "x") + `}`, tool.CodeInvalidInput, ""},
		{"no changes", `{"path":"conf/app.conf","changes":[]}`, tool.CodeInvalidInput, ""},
		{"missing old", `{"path":"conf/app.conf","changes":[{"line":1,"new":"x"}]}`, tool.CodeInvalidInput, ""},
		{"missing file", `{"path":"conf/nope.conf","changes":` + ch(1, "a", "b") + `}`, tool.CodeNotFound, ""},
		{"directory", `{"path":"conf","changes":` + ch(1, "a", "b") + `}`, tool.CodeInvalidInput, "directory"},
		{"fifo", `{"path":"conf/fifo.conf","changes":` + ch(1, "a", "b") + `}`, tool.CodeInvalidInput, "named pipe"},
		{"binary", `{"path":"conf/bin.conf","changes":` + ch(1, "a", "b") + `}`, tool.CodeNotText, ""},
		{"too large", `{"path":"conf/big.conf","changes":` + ch(1, "x", "y") + `}`, tool.CodeTooLarge, ""},
		{"hard link", `{"path":"conf/hardlink.conf","changes":` + ch(1, "a", "b") + `}`, tool.CodePathEscape, "hard links"},
		{"symlink out", `{"path":"conf/out.conf","changes":` + ch(1, "a", "b") + `}`, tool.CodeCapabilityDenied, ""},
		{"not writable", `{"path":"readme.txt","changes":` + ch(1, "a", "b") + `}`, tool.CodeCapabilityDenied, "needs the grant fs.write:readme.txt"},
		{"dot dot", `{"path":"conf/../readme.txt","changes":` + ch(1, "a", "b") + `}`, tool.CodeCapabilityDenied, ""},
		{"git config", `{"path":".git/config","changes":` + ch(1, "[core]", "[core] fsmonitor = evil") + `}`, tool.CodePolicyDenied, ".git"},
		{"nested git hook", `{"path":"conf/.git/hooks/pre-commit","changes":` + ch(1, "#!/bin/sh", "#!/bin/sh\ntouch /tmp/pwned") + `}`, tool.CodePolicyDenied, ".git"},
		{"warden policy", `{"path":".warden/policy.yaml","changes":` + ch(1, "version: 1", "version: 1\ngrants: [\"exec:*\"]") + `}`, tool.CodePolicyDenied, ".warden"},
		{"absolute ungranted", opsArgs("path", filepath.Join(e.outside, "other.conf"), "changes", []ConfigChange{{1, "a", "b"}}), tool.CodeCapabilityDenied, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.checksum(t)
			wantErr(t, e.call(t, "modify_config", tt.args), tt.code, tt.substr)
			if e.checksum(t) != before || e.arts.len() != 0 {
				t.Fatal("something was written")
			}
		})
	}
	// A policy granting fs.write:** still cannot reach .git or .warden.
	e.gate(t, e.policy("fs.write:**"))
	wantErr(t, e.call(t, "modify_config", `{"path":".git/config","changes":`+ch(1, "[core]", "x")+`}`), tool.CodePolicyDenied, "")
	wantErr(t, e.call(t, "modify_config", `{"path":".warden/policy.yaml","changes":`+ch(1, "version: 1", "x")+`}`), tool.CodePolicyDenied, "")

	// The artifact store fails: nothing is written.
	before := e.checksum(t)
	e.arts.err = errors.New("disk full")
	wantErr(t, e.call(t, "modify_config", `{"path":"conf/app.conf","changes":`+ch(3, "workers 1", "workers 2")+`}`), tool.CodeToolError, "disk full")
	e.arts.err = nil
	// No artifact store: refused (the dry run says so).
	e.ops.Artifacts = nil
	e.gate(t, e.policy())
	res := e.dryRun(t, "modify_config", `{"path":"conf/app.conf","changes":`+ch(3, "workers 1", "workers 2")+`}`)
	if !res.Success || !hasWarning(res, "no artifact store") {
		t.Errorf("%+v", res)
	}
	wantErr(t, e.call(t, "modify_config", `{"path":"conf/app.conf","changes":`+ch(3, "workers 1", "workers 2")+`}`), tool.CodeToolError, "artifact store")
	if e.checksum(t) != before {
		t.Fatal("written without keeping the old version")
	}
	// No one to approve.
	e.ops.Artifacts = e.arts
	p, err := policy.ParsePolicy("test", []byte(e.policy()))
	if err != nil {
		t.Fatal(err)
	}
	reg := gate.NewRegistry()
	if err := reg.Register(e.ops.tools()...); err != nil {
		t.Fatal(err)
	}
	g, err := gate.NewGate(gate.GateOptions{Registry: reg, Policy: p, Workspace: e.ws, Audit: &runtimetest.Audit{}, Approval: tool.ApproveNever})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, tooltest.Call(t, g, "modify_config", `{"path":"conf/app.conf","changes":`+ch(3, "workers 1", "workers 2")+`}`), tool.CodeApprovalRequired, "")
	if e.checksum(t) != before {
		t.Fatal("written without approval")
	}
}

// The file changes between the check and the rename: nothing is written.
func TestOpsModifyConfigConcurrentChange(t *testing.T) {
	e := setup(t)
	c := &tool.Call{Tool: "modify_config", Workspace: e.ws, Grants: e.g.Grants(),
		Args: json.RawMessage(`{"path":"conf/app.conf","changes":[{"line":3,"old":"workers 1","new":"workers 4"}]}`)}
	var a modifyArgs
	if err := c.Bind(&a); err != nil {
		t.Fatal(err)
	}
	toolName := &modifyConfig{e.ops}
	ed, err := toolName.prepare(c, &a)
	if err != nil {
		t.Fatal(err)
	}
	defer ed.tg.Close()
	app := filepath.Join(e.ws, "conf", "app.conf")
	tooltest.WriteFile(t, app, "someone else's edit\n", 0o640)
	if _, err := ed.write(); err == nil || err.Code != tool.CodePatchRejected {
		t.Fatalf("%v", err)
	}
	if got := tooltest.ReadFile(t, app); got != "someone else's edit\n" {
		t.Fatalf("file %q", got)
	}
	if ents, _ := os.ReadDir(filepath.Dir(app)); len(ents) != 1 {
		t.Errorf("temporary file left: %v", ents)
	}
}

// ---- redaction ------------------------------------------------------------

// A secret in the arguments (and in what the tools read) appears neither in
// the result nor in the audit; the kept old version is masked too.
func TestOpsRedaction(t *testing.T) {
	e := setup(t)
	tooltest.WriteFile(t, filepath.Join(e.ws, "conf", "tok.conf"), "token = "+tooltest.Canary+"\nport = 1\n", 0o600)
	tooltest.WriteFile(t, filepath.Join(e.ws, "conf", tooltest.Canary+".conf"), "a\n", 0o644)
	tests := []struct {
		name, tool, args string
		dry              bool
	}{
		{"read_logs unit", "read_logs", `{"unit":"` + tooltest.Canary + `"}`, false},
		{"read_logs message", "read_logs", `{"unit":"secret"}`, false},
		{"read_logs since", "read_logs", `{"unit":"nginx","since":"` + tooltest.Canary + `"}`, false},
		{"service_status", "service_status", `{"unit":"` + tooltest.Canary + `.service"}`, false},
		{"restart_service", "restart_service", `{"service":"` + tooltest.Canary + `"}`, false},
		{"restart_service dry run", "restart_service", `{"unit":"` + tooltest.Canary + `"}`, true},
		{"read_config path", "read_config", `{"path":"conf/` + tooltest.Canary + `.conf"}`, false},
		{"read_config content", "read_config", `{"path":"conf/tok.conf"}`, false},
		{"read_config missing", "read_config", `{"path":"conf/` + tooltest.Canary + `.missing"}`, false},
		{"modify_config new", "modify_config", `{"path":"conf/app.conf","changes":[{"line":1,"old":"# app","new":"# key ` + tooltest.Canary + `"}]}`, false},
		{"modify_config stale old", "modify_config", `{"path":"conf/app.conf","changes":[{"line":2,"old":"` + tooltest.Canary + `","new":"x"}]}`, false},
		{"modify_config dry run", "modify_config", `{"path":"conf/tok.conf","changes":[{"line":2,"old":"port = 1","new":"port = 2"}]}`, true},
		{"modify_config old version", "modify_config", `{"path":"conf/tok.conf","changes":[{"line":2,"old":"port = 1","new":"port = 2"}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.gate(t, e.policy()) // a fresh audit log
			var res tool.Result
			if tt.dry {
				res = e.dryRun(t, tt.tool, tt.args)
			} else {
				res = e.call(t, tt.tool, tt.args)
			}
			tooltest.AssertNoSecret(t, res, e.audit, tooltest.Canary)
			if blob, _ := json.Marshal(res); tooltest.Count(e.audit, "[REDACTED") == 0 && !strings.Contains(string(blob), "[REDACTED") {
				t.Error("nothing was redacted")
			}
		})
	}
	for d, b := range e.arts.blobs {
		if strings.Contains(string(b), tooltest.Canary) {
			t.Errorf("secret in artifact %s", d)
		}
	}
	// The tok.conf change kept a masked old version and said so.
	res := e.call(t, "modify_config", `{"path":"conf/tok.conf","changes":[{"line":2,"old":"port = 2","new":"port = 3"}]}`)
	tooltest.WantOK(t, res)
	d := tooltest.Decode[ConfigEdit](t, res)
	if old, _ := e.arts.get(d.Artifact); !d.ArtifactRedacted || string(old) != "token = [REDACTED]\nport = 2\n" || !hasWarning(res, "not a byte-exact copy") {
		t.Errorf("artifact %q %+v", old, d)
	}
	// The file itself keeps its secret.
	if got := tooltest.ReadFile(t, filepath.Join(e.ws, "conf", "tok.conf")); got != "token = "+tooltest.Canary+"\nport = 3\n" {
		t.Errorf("file %q", got)
	}
}
