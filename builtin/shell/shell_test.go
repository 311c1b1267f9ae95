package shell

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/sandbox"
	"github.com/wardenrt/warden/runtime/tool"
)

func TestShellHappyPath(t *testing.T) {
	ws := tooltest.WS(t)
	tooltest.WriteFile(t, filepath.Join(ws, "in.txt"), "b\na\nc\n", 0o644)
	tooltest.WriteFile(t, filepath.Join(ws, "sub", "x.txt"), "x\n", 0o644)
	grants := []string{"fs.read:**", "fs.write:out/**", "exec:sort", "exec:cat", "exec:tr", "exec:printenv", "exec:true", "exec:false", "exec:ls"}
	g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, grants...)

	tests := []struct {
		name   string
		args   map[string]any
		stdout string
		stderr string
		exit   int
	}{
		{"builtin echo", map[string]any{"command": "echo hello"}, "hello\n", "", 0},
		{"pipe", map[string]any{"command": "sort < in.txt | tr a-z A-Z"}, "A\nB\nC\n", "", 0},
		{"and/or", map[string]any{"command": "false || echo recovered && true"}, "recovered\n", "", 0},
		{"cmd subst", map[string]any{"command": `echo "n=$(cat in.txt | sort | cat)"`}, "n=a\nb\nc\n", "", 0},
		{"backticks", map[string]any{"command": "echo `cat sub/x.txt`"}, "x\n", "", 0},
		{"redirect write and read back", map[string]any{"command": "sort in.txt > out/s.txt 2>&1; cat out/s.txt"}, "a\nb\nc\n", "", 0},
		{"append", map[string]any{"command": "echo 1 >> out/a.txt; echo 2 >> out/a.txt; cat out/a.txt"}, "1\n2\n", "", 0},
		{"cwd", map[string]any{"command": "cat x.txt; pwd", "cwd": "sub"}, "x\n" + filepath.Join(ws, "sub") + "\n", "", 0},
		{"cd inside", map[string]any{"command": "cd sub && cat x.txt && cd .. && ls sub"}, "x\nx.txt\n", "", 0},
		{"env argument", map[string]any{"command": "printenv GREETING", "env": map[string]string{"GREETING": "hi there"}}, "hi there\n", "", 0},
		{"fixed PATH", map[string]any{"command": "printenv PATH"}, defaultPath + "\n", "", 0},
		{"stderr", map[string]any{"command": "echo oops >&2"}, "", "oops\n", 0},
		{"dev null", map[string]any{"command": "cat in.txt > /dev/null; echo done"}, "done\n", "", 0},
		{"glob", map[string]any{"command": "echo sub/*.txt"}, "sub/x.txt\n", "", 0},
		{"function", map[string]any{"command": "f() { echo \"in f: $1\"; }; f arg"}, "in f: arg\n", "", 0},
		{"eval of granted", map[string]any{"command": "x=cat; eval \"$x sub/x.txt\""}, "x\n", "", 0},
		{"wait for background", map[string]any{"command": "cat sub/x.txt & wait"}, "x\n", "", 0},
		{"here-string", map[string]any{"command": "tr a-z A-Z <<< abc"}, "ABC\n", "", 0},
		{"absolute path of the granted program", map[string]any{"command": which(t, "cat") + " sub/x.txt"}, "x\n", "", 0},
	}
	if err := os.MkdirAll(filepath.Join(ws, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tooltest.ShellDo(t, g, tt.args)
			if !res.Success {
				t.Fatalf("%+v\n%s", res.Error, res.Data)
			}
			d := tooltest.Decode[Result](t, res)
			if d.Stdout != tt.stdout || d.Stderr != tt.stderr || d.ExitCode != tt.exit || d.TimedOut {
				t.Fatalf("got %+v", d)
			}
		})
	}
}

// which returns where the shell tool finds a program.
func which(t testing.TB, name string) string {
	t.Helper()
	st := &run{pathDirs: strings.Split(defaultPath, ":")}
	p := st.lookPath(name)
	if p == "" {
		t.Skipf("%s is not installed", name)
	}
	return p
}

func TestShellErrorCodes(t *testing.T) {
	ws := tooltest.WS(t)
	tooltest.WriteFile(t, filepath.Join(ws, "in.txt"), "a\n", 0o644)
	g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{MaxTimeout: time.Minute}), ws,
		"fs.read:**", "exec:cat", "exec:sleep", "exec:warden-no-such-program", "exec:true")
	tests := []struct {
		name string
		args map[string]any
		code tool.Code
		exit int    // -2: not checked (refused before running)
		msg  string // in the error message
		hint string // in the hint
	}{
		{"exit status", map[string]any{"command": "echo partial; exit 3"}, tool.CodeCommandFailed, 3, "exit code 3", "stderr"},
		{"program fails", map[string]any{"command": "cat missing.txt"}, tool.CodeCommandFailed, 1, "missing.txt", ""},
		{"not found", map[string]any{"command": "warden-no-such-program --flag"}, tool.CodeCommandNotFound, 127, "warden-no-such-program", "PATH"},
		{"timeout", map[string]any{"command": "sleep 5", "timeout_ms": 200}, tool.CodeCommandTimeout, -1, "timed out", "timeout_ms"},
		{"ungranted (static)", map[string]any{"command": "rm in.txt"}, tool.CodeCapabilityDenied, -2, "exec:rm", "needs the grant exec:rm"},
		{"ungranted (run time)", map[string]any{"command": "$(echo rm) in.txt"}, tool.CodeCapabilityDenied, 126, "program rm is not granted", "needs the grant exec:rm"},
		{"parse error", map[string]any{"command": "echo 'unterminated"}, tool.CodeInvalidInput, -2, "line 1, column 6", "syntax"},
		{"parse error, line 2", map[string]any{"command": "true\nif then fi"}, tool.CodeInvalidInput, -2, "line 2", ""},
		{"NUL", map[string]any{"command": "echo a\x00b"}, tool.CodeInvalidInput, -2, "NUL", ""},
		{"env PATH", map[string]any{"command": "true", "env": map[string]string{"PATH": "/tmp"}}, tool.CodeInvalidInput, -2, "PATH cannot be set", ""},
		{"bad env name", map[string]any{"command": "true", "env": map[string]string{"A-B": "x"}}, tool.CodeInvalidInput, -2, "", ""},
		{"unknown field", map[string]any{"command": "true", "timeout": 5}, tool.CodeInvalidInput, -2, "", ""},
		{"timeout above the limit", map[string]any{"command": "true", "timeout_ms": 120000}, tool.CodeInvalidInput, -2, "above the limit", "60000"},
		{"cwd missing", map[string]any{"command": "true", "cwd": "nope"}, tool.CodeNotFound, -2, "not an existing directory", ""},
		{"cwd outside", map[string]any{"command": "true", "cwd": "/"}, tool.CodeCapabilityDenied, -2, "fs.read:/", ""},
		{"redirect not granted", map[string]any{"command": "echo x > out.txt"}, tool.CodeCapabilityDenied, -2, "fs.write", "needs the grant fs.write:out.txt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tooltest.ShellDo(t, g, tt.args)
			if res.Success || res.Error.Code != tt.code {
				t.Fatalf("want %s, got %+v", tt.code, res.Error)
			}
			if !strings.Contains(res.Error.Message, tt.msg) || !strings.Contains(res.Error.Hint, tt.hint) {
				t.Fatalf("error %+v", res.Error)
			}
			if tt.exit == -2 {
				return
			}
			d := tooltest.Decode[Result](t, res)
			if d.ExitCode != tt.exit || d.TimedOut != (tt.code == tool.CodeCommandTimeout) {
				t.Fatalf("data %+v", d)
			}
		})
	}
	// COMMAND_FAILED keeps the data.
	res := tooltest.ShellDo(t, g, map[string]any{"command": "echo partial; echo bad >&2; exit 3"})
	if d := tooltest.Decode[Result](t, res); d.Stdout != "partial\n" || d.Stderr != "bad\n" || !strings.Contains(res.Error.Message, ": bad") {
		t.Fatalf("%+v %+v", d, res.Error)
	}
	// A program not found that the command recovers from is no failure.
	res = tooltest.ShellDo(t, g, map[string]any{"command": "warden-no-such-program || echo fallback"})
	if !res.Success || tooltest.Decode[Result](t, res).Stdout != "fallback\n" {
		t.Fatalf("%+v %s", res.Error, res.Data)
	}
}

func TestShellSilent(t *testing.T) {
	ws := tooltest.WS(t)
	g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, "fs.read:**", "exec:cat")
	res := tooltest.ShellDo(t, g, map[string]any{"command": "echo out; echo err >&2", "silent": true})
	d := tooltest.Decode[Result](t, res)
	if !res.Success || d.Stdout != "" || d.Stderr != "" || strings.Contains(res.Output, "out\n") {
		t.Fatalf("%+v %q", d, res.Output)
	}
	res = tooltest.ShellDo(t, g, map[string]any{"command": "echo out; cat missing", "silent": true})
	d = tooltest.Decode[Result](t, res)
	if res.Success || d.Stdout != "" || !strings.Contains(d.Stderr, "missing") || d.ExitCode != 1 {
		t.Fatalf("%+v", d)
	}
}

func TestShellDryRun(t *testing.T) {
	ws := tooltest.WS(t)
	tooltest.WriteFile(t, filepath.Join(ws, "data", "a.txt"), "a\n", 0o644)
	g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, "fs.read:**", "fs.write:**", "exec:rm", "exec:git", "exec:sort", "exec:touch", "exec:date")
	before := tooltest.TreeChecksum(t, ws)
	cmd := "sort data/a.txt > out.txt && rm -rf data; touch $(echo marker) 2>/dev/null | git status --short\necho `date` >> log.txt"
	res := tooltest.CallReq(t, g, gate.Request{Tool: "shell", Args: json.RawMessage(fmt.Sprintf(`{"command":%q}`, cmd)), Principal: []string{"test"}, DryRun: true})
	if !res.Success || !res.DryRun {
		t.Fatalf("%+v", res.Error)
	}
	if after := tooltest.TreeChecksum(t, ws); after != before {
		t.Fatal("the dry run changed the workspace")
	}
	for _, want := range []string{
		"nothing was run", "1:1", "program  sort data/a.txt > out.txt (write " + filepath.Join(ws, "out.txt") + ")",
		"program  rm -rf data", "program  touch ‹$(echo marker)›", "builtin  echo marker   [in $(…)]",
		"2> /dev/null", "git status --short", "in pipe", "needs exec:git", "`…`", ">> log.txt",
		"needs: fs.read:" + ws, "exec:rm",
	} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("plan lacks %q:\n%s", want, res.Output)
		}
	}
	var plan Plan
	if err := json.Unmarshal(res.Data, &plan); err != nil || plan.Cwd != ws || plan.TimeoutMS != 30000 || len(plan.Commands) < 5 {
		t.Fatalf("%v %+v", err, plan)
	}
	warned := strings.Join(res.Warnings, "\n")
	if !strings.Contains(warned, "rm -rf deletes files") || !strings.Contains(warned, "dry run") {
		t.Fatalf("warnings %q", res.Warnings)
	}
	// A dry run refuses what the real run would refuse, before anything.
	res = tooltest.CallReq(t, g, gate.Request{Tool: "shell", Args: json.RawMessage(`{"command":"curl -s example.com"}`), Principal: []string{"test"}, DryRun: true})
	if tooltest.Code(res) != tool.CodeCapabilityDenied {
		t.Fatalf("%+v", res.Error)
	}
}

func TestShellRedactsSecrets(t *testing.T) {
	const secret = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
	ws := tooltest.WS(t)
	g, audit := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, "fs.read:**", "exec:printenv")
	for _, args := range []map[string]any{
		{"command": "echo " + secret},
		{"command": "printenv TOKEN_X", "env": map[string]string{"TOKEN_X": secret}},
		{"command": "echo " + secret + " >&2; exit 2"},
		{"command": "rm " + secret}, // refused: the secret is in the refusal's message
	} {
		res := tooltest.ShellDo(t, g, args)
		tooltest.AssertNoSecret(t, res, audit, secret)
	}
	// A dry run too.
	res := tooltest.CallReq(t, g, gate.Request{Tool: "shell", Args: json.RawMessage(`{"command":"echo ` + secret + `"}`), Principal: []string{"test"}, DryRun: true})
	tooltest.AssertNoSecret(t, res, audit, secret)
}

func TestShellEnvironment(t *testing.T) {
	ws := tooltest.WS(t)
	host := []string{
		"HOME=/home/someone", "LANG=C.UTF-8", "PATH=/opt/evil:.", "GOPATH=/go", "GOFLAGS=-mod=mod",
		"API_KEY=k-123", "MY_SECRET=s-123", "GITHUB_TOKEN=t-123", "DB_PASSWORD=p-123", "LD_PRELOAD=/tmp/x.so",
		"UNRELATED=u", "GIT_DIR=/elsewhere",
	}
	sh := tool.Adapt[Args](&Shell{Environ: func() []string { return host }})
	g, _ := tooltest.ShellGate(t, sh, ws, "fs.read:**", "exec:env", "env:GO*", "env:API_KEY", "env:GIT*", "env:MY*")
	res := tooltest.ShellDo(t, g, map[string]any{"command": "env"})
	if !res.Success {
		t.Fatalf("%+v", res.Error)
	}
	out := tooltest.Decode[Result](t, res).Stdout
	// HOME is one the sandbox does not reach: programs see none.
	for _, want := range []string{"HOME=" + sandbox.NoHome, "LANG=C.UTF-8", "PATH=" + defaultPath, "GOPATH=/go", "GOFLAGS=-mod=mod", "API_KEY=", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_KEY_0=core.fsmonitor"} {
		if !strings.Contains(out, want) {
			t.Errorf("env lacks %s:\n%s", want, out)
		}
	}
	for _, not := range []string{"/opt/evil", "MY_SECRET", "GITHUB_TOKEN", "DB_PASSWORD", "LD_PRELOAD", "UNRELATED", "GIT_DIR"} {
		if strings.Contains(out, not) {
			t.Errorf("env has %s:\n%s", not, out)
		}
	}
	// An exact grant opens a secret-looking or guarded host variable.
	g, _ = tooltest.ShellGate(t, sh, ws, "fs.read:**", "exec:env", "env:GITHUB_TOKEN", "env:GIT_DIR")
	out = tooltest.Decode[Result](t, tooltest.ShellDo(t, g, map[string]any{"command": "env"})).Stdout
	if !strings.Contains(out, "GITHUB_TOKEN=") || !strings.Contains(out, "GIT_DIR=/elsewhere\n") {
		t.Errorf("exact grants: %s", out)
	}
	// The call's env argument may set guarded names only with an exact grant.
	res = tooltest.ShellDo(t, g, map[string]any{"command": "env", "env": map[string]string{"GIT_DIR": "/x", "NODE_ENV": "production"}})
	out = tooltest.Decode[Result](t, res).Stdout
	if !res.Success || !strings.Contains(out, "GIT_DIR=/x\n") || !strings.Contains(out, "NODE_ENV=production\n") {
		t.Fatalf("%+v %s", res.Error, out)
	}
	res = tooltest.ShellDo(t, g, map[string]any{"command": "env", "env": map[string]string{"GIT_CONFIG_GLOBAL": "/x"}})
	if tooltest.Code(res) != tool.CodeCapabilityDenied || !strings.Contains(res.Error.Hint, "env:GIT_CONFIG_GLOBAL") {
		t.Fatalf("%+v", res.Error)
	}
	// Identity variables of git are not guarded.
	res = tooltest.ShellDo(t, g, map[string]any{"command": "env", "env": map[string]string{"GIT_AUTHOR_NAME": "A"}})
	if !res.Success {
		t.Fatalf("%+v", res.Error)
	}
	// TMPDIR reaches the command and its programs unchanged (the
	// interpreter's own temporary directory is not it).
	sh = tool.Adapt[Args](&Shell{Environ: func() []string { return []string{"TMPDIR=/tmp/it's here"} }})
	g, _ = tooltest.ShellGate(t, sh, ws, "fs.read:**", "exec:printenv")
	res = tooltest.ShellDo(t, g, map[string]any{"command": `echo "$TMPDIR"; printenv TMPDIR`})
	if out := tooltest.Decode[Result](t, res).Stdout; !res.Success || out != "/tmp/it's here\n/tmp/it's here\n" {
		t.Fatalf("%+v %q", res.Error, out)
	}
}

func TestShellWarnings(t *testing.T) {
	ws := tooltest.WS(t)
	tooltest.WriteFile(t, filepath.Join(ws, "junk", "f"), "x", 0o644)
	g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{}), ws, "fs.read:**", "fs.write:**", "exec:rm", "exec:sh", "exec:true")
	res := tooltest.ShellDo(t, g, map[string]any{"command": "rm -rf junk && sh -c true"})
	if !res.Success {
		t.Fatalf("%+v", res.Error)
	}
	warned := strings.Join(res.Warnings, "\n")
	if !strings.Contains(warned, "rm -rf deletes files") || !strings.Contains(warned, "exec:sh runs any code it is given") {
		t.Fatalf("%q", res.Warnings)
	}
	if _, err := os.Stat(filepath.Join(ws, "junk")); !os.IsNotExist(err) {
		t.Fatal("rm -rf did not run")
	}
}

func TestShellOutputCap(t *testing.T) {
	ws := tooltest.WS(t)
	g, _ := tooltest.ShellGate(t, tool.Adapt[Args](&Shell{MaxOutput: 1000}), ws, "fs.read:**", "exec:head", "exec:yes")
	res := tooltest.ShellDo(t, g, map[string]any{"command": "yes | head -c 5000"})
	d := tooltest.Decode[Result](t, res)
	if !res.Success || !strings.HasPrefix(d.Stdout, "y\ny\n") || !strings.Contains(d.Stdout, "[truncated: 1000 of 5000 bytes kept]") {
		t.Fatalf("%+v %q", res.Error, d.Stdout)
	}
	if !strings.Contains(strings.Join(res.Warnings, " "), "stdout was cut at 1000 bytes") {
		t.Fatalf("%q", res.Warnings)
	}
}

func TestShellWordLit(t *testing.T) {
	tests := []struct {
		word string
		want string
		ok   bool
	}{
		{`rm`, "rm", true},
		{`\rm`, "rm", true},
		{`"r"m`, "rm", true},
		{`'r'"m"`, "rm", true},
		{`"a\"b\$c"`, `a"b$c`, true},
		{`$'rm'`, "rm", true},
		{`$'r\x6d'`, "", false},
		{`$x`, "", false},
		{`"$x"`, "", false},
		{`$(echo rm)`, "", false},
		{"`echo rm`", "", false},
		{`r*`, "", false},
		{`\*`, "*", true},
		{`{rm,x}`, "", false},
		{`~/x`, "", false},
		{`$((1))`, "", false},
	}
	for _, tt := range tests {
		f, err := syntax.NewParser().Parse(strings.NewReader(tt.word), "")
		if err != nil {
			t.Fatalf("%s: %v", tt.word, err)
		}
		got, ok := wordLit(f.Stmts[0].Cmd.(*syntax.CallExpr).Args[0])
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: got %q %v", tt.word, got, ok)
		}
	}
}
