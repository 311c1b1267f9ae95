//go:build linux

package builtin

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wardenrt/warden/builtin/fs"
	"github.com/wardenrt/warden/builtin/git"
	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/builtin/ops"
	"github.com/wardenrt/warden/builtin/shell"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/redact"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
)

// Masks out, originals back: the gate masks the secrets of every result
// with ids kept in the run's vault and restores a mask written back into
// the file it came from. These tests drive the real tools through the gate.

const (
	mkAWS = "AKIAIOSFODNN7EXAMPLE"
	mkGH  = "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"
	mkPW  = "s3cr3t-Pa55w0rd-x1"
	mkEnv = "APP=demo\nDEBUG=false\nAWS_ACCESS_KEY_ID=" + mkAWS + "\nGITHUB_TOKEN=" + mkGH + "\nDB_PASSWORD=" + mkPW + "\n"
)

var mkSecrets = []string{mkAWS, mkGH, mkPW}

var reMask = regexp.MustCompile(`\[REDACTED:[a-z0-9-]+:[0-9a-f]{4,16}\]`)

// mkSetup returns a workspace holding .env, and a gate over the fs, git,
// shell and config tools with read and write grants on it.
func mkSetup(t *testing.T, grants ...string) (string, *gate.Gate, *runtimetest.Audit) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mkWrite(t, ws, ".env", mkEnv)
	tools := append(fs.Tools(), git.Tools(git.Config{})...)
	tools = append(tools, tool.Adapt[shell.Args](&shell.Shell{}))
	tools = append(tools, ops.Tools(ops.Config{Artifacts: &runtimetest.Artifacts{}})...)
	policy := `version: 1
grants: ["fs.read:**", "fs.write:**", "git.read", "git.write", "exec:cat"` + func() string {
		var b strings.Builder
		for _, g := range grants {
			b.WriteString(`, "` + g + `"`)
		}
		return b.String()
	}() + "]\n"
	g, audit := tooltest.Gate(t, policy, ws, tools...)
	return ws, g, audit
}

func mkWrite(t *testing.T, ws, rel, content string) {
	t.Helper()
	p := filepath.Join(ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkRead(t *testing.T, ws, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mkCall calls a tool in the run whose vault is v (nil: a call of its own).
func mkCall(t *testing.T, g *gate.Gate, v *tool.Vault, tool string, args any) tool.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return tooltest.CallReq(t, g, gate.Request{Tool: tool, Args: raw, Principal: []string{"test"}, Vault: v})
}

// mkNoSecret fails if a secret is in the result or any audit record.
func mkNoSecret(t *testing.T, res tool.Result, audit *runtimetest.Audit) {
	t.Helper()
	blob, _ := json.Marshal(res)
	for _, s := range mkSecrets {
		if strings.Contains(string(blob), s) {
			t.Errorf("secret %s in the result: %s", s, blob)
		}
		if n := tooltest.Count(audit, s); n > 0 {
			t.Errorf("secret %s in %d audit records", s, n)
		}
	}
}

func mkWarning(res tool.Result) string {
	for _, w := range res.Warnings {
		if strings.HasPrefix(w, "secrets masked: ") {
			return w
		}
	}
	return ""
}

func mkRefused(t *testing.T, res tool.Result, mask string) {
	t.Helper()
	if res.Success || res.Error == nil || res.Error.Code != tool.CodeInvalidInput {
		t.Fatalf("want INVALID_INPUT, got success=%v error=%+v", res.Success, res.Error)
	}
	t.Logf("refused: %s (%s)", res.Error.Message, res.Error.Hint)
	if mask != "" && !strings.Contains(res.Error.Message, mask) {
		t.Errorf("the refusal does not name the mask %s: %s", mask, res.Error.Message)
	}
}

// Code read and written back is byte-identical: nothing in it is a secret.
func TestMaskCodeRoundTrip(t *testing.T) {
	ws, g, _ := mkSetup(t)
	code := "package demo\n\nfunc f(cfg Config) {\n\tfor _, cookie := range []int{1} {\n\t\t_ = cookie\n\t}\n" +
		"\tc := client{apiKey: cfg.APIKey, token: token}\n\ths.masterSecret = masterFromPreMasterSecret(c, hs.preMasterSecret)\n" +
		"\treq.Header.Set(\"Authorization\", fmt.Sprintf(\"Bearer %s\", token))\n}\n\nconst envMCPToken = \"WARDEN_MCP_TOKEN\"\n"
	mkWrite(t, ws, "demo.go", code)
	v := tool.NewVault()
	res := mkCall(t, g, v, "fs_read", map[string]any{"path": "demo.go"})
	tooltest.WantOK(t, res)
	if res.Output != code || mkWarning(res) != "" {
		t.Fatalf("code was altered:\n%s\nwarnings %q", res.Output, res.Warnings)
	}
	tooltest.WantOK(t, mkCall(t, g, v, "fs_write", map[string]any{"path": "demo.go", "content": res.Output}))
	if got := mkRead(t, ws, "demo.go"); got != code {
		t.Fatalf("written back:\n%s", got)
	}
}

// A .env read, one unrelated line edited, written back: the secrets are
// intact on disk; neither the result, the audit log nor the write's own
// result ever held them.
func TestMaskEnvRoundTrip(t *testing.T) {
	ws, g, audit := mkSetup(t)
	v := tool.NewVault()
	res := mkCall(t, g, v, "fs_read", map[string]any{"path": ".env"})
	tooltest.WantOK(t, res)
	mkNoSecret(t, res, audit)
	masks := reMask.FindAllString(res.Output, -1)
	if len(masks) != 3 || !strings.Contains(masks[0], ":aws-access-key:") || !strings.Contains(masks[1], ":github-token:") || !strings.Contains(masks[2], ":password:") {
		t.Fatalf("masks %q in\n%s", masks, res.Output)
	}
	w := mkWarning(res)
	for _, want := range []string{"3 in the output", "aws-access-key", "github-token", "password", "lines 3-5"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q lacks %q", w, want)
		}
	}
	// Read again: the same secrets have the same masks.
	again := mkCall(t, g, v, "fs_read", map[string]any{"path": ".env"})
	if again.Output != res.Output {
		t.Errorf("masks changed between reads:\n%s\n%s", res.Output, again.Output)
	}

	edited := strings.Replace(res.Output, "DEBUG=false", "DEBUG=true", 1)
	// A dry run shows the diff, masked.
	dry := tooltest.CallReq(t, g, gate.Request{Tool: "fs_write", Args: mkJSON(t, map[string]any{"path": ".env", "content": edited}),
		Principal: []string{"test"}, Vault: v, DryRun: true})
	tooltest.WantOK(t, dry)
	mkNoSecret(t, dry, audit)
	if !strings.Contains(string(dry.Data), "+DEBUG=true") {
		t.Errorf("dry run data %s", dry.Data)
	}
	if mkRead(t, ws, ".env") != mkEnv {
		t.Fatal("the dry run changed the file")
	}

	wr := mkCall(t, g, v, "fs_write", map[string]any{"path": ".env", "content": edited})
	tooltest.WantOK(t, wr)
	mkNoSecret(t, wr, audit)
	if got, want := mkRead(t, ws, ".env"), strings.Replace(mkEnv, "DEBUG=false", "DEBUG=true", 1); got != want {
		t.Fatalf(".env on disk:\n%s\nwant\n%s", got, want)
	}
	// The audit log holds the arguments as sent: masks.
	if tooltest.Count(audit, masks[1]) == 0 {
		t.Error("the audit log does not hold the masked arguments")
	}
}

func mkJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A mask that is unknown, of another kind, from another run, in the wrong
// place or bound for another file is refused, naming it, and nothing is
// written.
func TestMaskRefusals(t *testing.T) {
	ws, g, audit := mkSetup(t)
	v := tool.NewVault()
	res := mkCall(t, g, v, "fs_read", map[string]any{"path": ".env"})
	masks := reMask.FindAllString(res.Output, -1)
	if len(masks) != 3 {
		t.Fatalf("masks %q", masks)
	}
	gh := masks[1]
	id := gh[strings.LastIndexByte(gh, ':')+1 : len(gh)-1]
	unknown := "[REDACTED:github-token:" + strings.Repeat("f", len(id)) + "]"
	if unknown == gh {
		unknown = "[REDACTED:github-token:" + strings.Repeat("e", len(id)) + "]"
	}
	otherKind := "[REDACTED:password:" + id + "]"
	for _, tt := range []struct {
		name  string
		v     *tool.Vault
		tool  string
		args  map[string]any
		mask  string
		check string // a file that must not have changed (or appeared)
	}{
		{"unknown id", v, "fs_write", map[string]any{"path": ".env", "content": "GITHUB_TOKEN=" + unknown + "\n"}, unknown, ".env"},
		{"another kind", v, "fs_write", map[string]any{"path": ".env", "content": "GITHUB_TOKEN=" + otherKind + "\n"}, otherKind, ".env"},
		{"another run", tool.NewVault(), "fs_write", map[string]any{"path": ".env", "content": "GITHUB_TOKEN=" + gh + "\n"}, gh, ".env"},
		{"no run (warden call)", nil, "fs_write", map[string]any{"path": ".env", "content": "GITHUB_TOKEN=" + gh + "\n"}, gh, ".env"},
		{"another file", v, "fs_write", map[string]any{"path": "public.txt", "content": "token " + gh + "\n"}, gh, "public.txt"},
		{"in a path", v, "fs_write", map[string]any{"path": "x-" + gh + ".txt", "content": "x"}, gh, ""},
		{"another file by modify_config", v, "modify_config", map[string]any{"path": "app.conf", "changes": []map[string]any{{"line": 1, "old": "a", "new": gh}}}, gh, "app.conf"},
		{"another file by shell", v, "shell", map[string]any{"command": "echo 'T=" + gh + "' > public.txt"}, gh, "public.txt"},
		{"a program's argument", v, "shell", map[string]any{"command": "cat " + gh}, gh, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mkWrite(t, ws, "app.conf", "a\n")
			_ = os.Remove(filepath.Join(ws, "public.txt"))
			var before string
			if tt.check != "" {
				before, _ = readIfExists(filepath.Join(ws, tt.check))
			}
			res := mkCall(t, g, tt.v, tt.tool, tt.args)
			mkRefused(t, res, tt.mask)
			mkNoSecret(t, res, audit)
			if tt.check != "" {
				if after, _ := readIfExists(filepath.Join(ws, tt.check)); after != before {
					t.Errorf("%s changed: %q", tt.check, after)
				}
			}
		})
	}
	if got := mkRead(t, ws, ".env"); got != mkEnv {
		t.Fatalf(".env changed:\n%s", got)
	}
}

func readIfExists(p string) (string, bool) {
	b, err := os.ReadFile(p)
	return string(b), err == nil
}

// read_config and modify_config: a changed line that holds a mask (old
// and new) keeps its secret.
func TestMaskModifyConfigRoundTrip(t *testing.T) {
	ws, g, audit := mkSetup(t)
	v := tool.NewVault()
	res := mkCall(t, g, v, "read_config", map[string]any{"path": ".env"})
	tooltest.WantOK(t, res)
	mkNoSecret(t, res, audit)
	if w := mkWarning(res); !strings.Contains(w, "3 in the output") || !strings.Contains(w, "3 in data") {
		t.Errorf("warning %q", w)
	}
	var d ops.ConfigFile
	if err := json.Unmarshal(res.Data, &d); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(d.Content, "\n")
	old := lines[4] // DB_PASSWORD=[REDACTED:password:…]
	if !reMask.MatchString(old) {
		t.Fatalf("line 5 %q", old)
	}
	wr := mkCall(t, g, v, "modify_config", map[string]any{"path": ".env", "changes": []map[string]any{
		{"line": 2, "old": "DEBUG=false", "new": "DEBUG=true"},
		{"line": 5, "old": old, "new": old + " # rotate in May"},
	}})
	tooltest.WantOK(t, wr)
	mkNoSecret(t, wr, audit)
	want := strings.Replace(strings.Replace(mkEnv, "DEBUG=false", "DEBUG=true", 1), mkPW, mkPW+" # rotate in May", 1)
	if got := mkRead(t, ws, ".env"); got != want {
		t.Fatalf(".env:\n%s\nwant\n%s", got, want)
	}
}

// A patch made from git_diff output holding a mask applies, after the file
// was reset, and keeps the secret.
func TestMaskGitPatchRoundTrip(t *testing.T) {
	ws, g, audit := mkSetup(t)
	tooltest.GitPlain(t, ws, "init", "-q", "-b", "main")
	tooltest.GitPlain(t, ws, "config", "user.name", "Repo User")
	tooltest.GitPlain(t, ws, "config", "user.email", "repo@example.com")
	committed := "APP=demo\nDEBUG=false\n"
	mkWrite(t, ws, ".env", committed)
	tooltest.GitPlain(t, ws, "add", "-A")
	tooltest.GitPlain(t, ws, "commit", "-q", "-m", "first")
	changed := "APP=demo\nDEBUG=true\nGITHUB_TOKEN=" + mkGH + "\n"
	mkWrite(t, ws, ".env", changed)

	v := tool.NewVault()
	diff := mkCall(t, g, v, "git_diff", map[string]any{})
	tooltest.WantOK(t, diff)
	mkNoSecret(t, diff, audit)
	if !reMask.MatchString(diff.Output) || mkWarning(diff) == "" {
		t.Fatalf("diff not masked or no warning:\n%s\n%q", diff.Output, diff.Warnings)
	}
	tooltest.GitPlain(t, ws, "checkout", "--", ".env")
	if mkRead(t, ws, ".env") != committed {
		t.Fatal("checkout")
	}
	res := mkCall(t, g, v, "git_apply_patch", map[string]any{"patch": diff.Output})
	tooltest.WantOK(t, res)
	mkNoSecret(t, res, audit)
	if got := mkRead(t, ws, ".env"); got != changed {
		t.Fatalf(".env:\n%s\nwant\n%s", got, changed)
	}
	// A mask in a file name is not text that lands in a file: refused.
	m := reMask.FindString(diff.Output)
	named := strings.Replace(diff.Output, "b/.env", "b/"+m, 1)
	named = strings.Replace(named, "+++ b/.env", "+++ b/"+m, 1)
	mkRefused(t, mkCall(t, g, v, "git_apply_patch", map[string]any{"patch": named}), m)
	// The same patch bound for another file is refused.
	mkWrite(t, ws, "other.env", committed)
	tooltest.GitPlain(t, ws, "add", "other.env")
	other := strings.ReplaceAll(diff.Output, ".env", "other.env")
	mkRefused(t, mkCall(t, g, v, "git_apply_patch", map[string]any{"patch": other}), "")
	if mkRead(t, ws, "other.env") != committed {
		t.Fatal("other.env changed")
	}
}

// Shell output has no file of its own: a mask from `cat .env` goes back
// into a file that holds the secret already (a here-document, echo), and
// nowhere else; an original that would end the here-document or a quote
// is refused.
func TestMaskShellRoundTrip(t *testing.T) {
	ws, g, audit := mkSetup(t, "exec:git")
	v := tool.NewVault()
	res := mkCall(t, g, v, "shell", map[string]any{"command": "cat .env"})
	tooltest.WantOK(t, res)
	mkNoSecret(t, res, audit)
	var d shell.Result
	if err := json.Unmarshal(res.Data, &d); err != nil {
		t.Fatal(err)
	}
	if mkWarning(res) == "" || len(reMask.FindAllString(res.Output, -1)) != 3 {
		t.Fatalf("output %q warnings %q", res.Output, res.Warnings)
	}
	edited := strings.Replace(d.Stdout, "DEBUG=false", "DEBUG=true", 1)
	wr := mkCall(t, g, v, "shell", map[string]any{"command": "cat > .env <<'EOF'\n" + edited + "EOF\n"})
	tooltest.WantOK(t, wr)
	mkNoSecret(t, wr, audit)
	want := strings.Replace(mkEnv, "DEBUG=false", "DEBUG=true", 1)
	if got := mkRead(t, ws, ".env"); got != want {
		t.Fatalf(".env:\n%s\nwant\n%s", got, want)
	}
	gh := reMask.FindAllString(d.Stdout, -1)[1]
	// echo >> a file that holds it: restored.
	tooltest.WantOK(t, mkCall(t, g, v, "shell", map[string]any{"command": `echo "BACKUP_TOKEN=` + gh + `" >> .env`}))
	if got := mkRead(t, ws, ".env"); got != want+"BACKUP_TOKEN="+mkGH+"\n" {
		t.Fatalf(".env:\n%s", got)
	}
	// Into a new file: refused, not created.
	mkRefused(t, mkCall(t, g, v, "shell", map[string]any{"command": "cat > copy.env <<'EOF'\n" + edited + "EOF\n"}), "")
	if _, err := os.Stat(filepath.Join(ws, "copy.env")); err == nil {
		t.Fatal("copy.env was created")
	}
	// A command that redefines cat may send the here-document elsewhere:
	// no mask is restored in it, so it is refused.
	leak := "cat() { command cat > leak.txt; }\ncat > .env <<'EOF'\n" + edited + "EOF\n"
	mkRefused(t, mkCall(t, g, v, "shell", map[string]any{"command": leak}), "")
	if _, err := os.Stat(filepath.Join(ws, "leak.txt")); err == nil {
		t.Fatal("leak.txt was created")
	}
}

// An original that would change how the command is read is refused: a
// private key whose body holds the here-document's delimiter, a password
// holding a quote.
func TestMaskShellInjection(t *testing.T) {
	ws, g, audit := mkSetup(t)
	key := "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1c7\nEOF\ntouch pwned\n-----END RSA PRIVATE KEY-----"
	mkWrite(t, ws, "key.pem", key+"\n")
	mkWrite(t, ws, "db.yaml", "password: it's-a-s3cret\n")
	v := tool.NewVault()
	for _, tt := range []struct{ file, command string }{
		{"key.pem", "cat > key.pem <<EOF\n%s\nEOF\n"},
		{"db.yaml", "echo 'password: %s' > db.yaml"},
	} {
		res := mkCall(t, g, v, "fs_read", map[string]any{"path": tt.file})
		m := reMask.FindString(res.Output)
		if m == "" {
			t.Fatalf("%s not masked: %q", tt.file, res.Output)
		}
		before := mkRead(t, ws, tt.file)
		out := mkCall(t, g, v, "shell", map[string]any{"command": strings.Replace(tt.command, "%s", m, 1)})
		mkRefused(t, out, m)
		if strings.Contains(out.Error.Message, "it's") || tooltest.Count(audit, "it's-a-s3cret") > 0 {
			t.Errorf("the refusal shows the secret: %s", out.Error.Message)
		}
		if mkRead(t, ws, tt.file) != before {
			t.Errorf("%s changed", tt.file)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned")); err == nil {
		t.Fatal("the key's text ran as a command")
	}
}

// Mask-shaped text a file holds (a document about redaction) comes back as
// it is and goes back as it is.
func TestMaskLiteralText(t *testing.T) {
	ws, g, _ := mkSetup(t)
	doc := "A mask looks like [REDACTED:aws-access-key:3f9a] in a result.\n"
	mkWrite(t, ws, "doc.md", doc)
	v := tool.NewVault()
	res := mkCall(t, g, v, "fs_read", map[string]any{"path": "doc.md"})
	if res.Output != doc || mkWarning(res) != "" {
		t.Fatalf("output %q warnings %q", res.Output, res.Warnings)
	}
	tooltest.WantOK(t, mkCall(t, g, v, "fs_write", map[string]any{"path": "doc.md", "content": res.Output + "More.\n"}))
	if got := mkRead(t, ws, "doc.md"); got != doc+"More.\n" {
		t.Fatalf("doc.md %q", got)
	}
}

// Mask-shaped text whose id the run's vault gave another secret is
// rewritten as a mask-text mask, so that it is never taken for that
// secret: the result says so, like any mask, and the text goes back into
// its file as it was.
func TestMaskTextWarned(t *testing.T) {
	ws, g, _ := mkSetup(t)
	v := tool.NewVault()
	env := mkCall(t, g, v, "fs_read", map[string]any{"path": ".env"})
	refs := redact.FindMasks(env.Output)
	if len(refs) != 3 {
		t.Fatalf(".env: %q", env.Output)
	}
	forged := "[REDACTED:password:" + refs[0].ID + "]" // the AWS key's id, another kind
	doc := "Masks look like this:\nsee " + forged + " here\n"
	mkWrite(t, ws, "doc.md", doc)
	res := mkCall(t, g, v, "fs_read", map[string]any{"path": "doc.md"})
	if strings.Contains(res.Output, forged) || !strings.Contains(res.Output, "[REDACTED:mask-text:") {
		t.Fatalf("output %q", res.Output)
	}
	if w := mkWarning(res); !strings.HasPrefix(w, "secrets masked: 1 in the output (mask-text) on line 2.") {
		t.Fatalf("the rewrite is not in the warning: %q", res.Warnings)
	}
	tooltest.WantOK(t, mkCall(t, g, v, "fs_write", map[string]any{"path": "doc.md", "content": res.Output + "More.\n"}))
	if got := mkRead(t, ws, "doc.md"); got != doc+"More.\n" {
		t.Fatalf("doc.md %q", got)
	}
}

// A plain [REDACTED] (from memory, a log, a stored record) was never
// kept: written into a file it is that text, and the write's result says
// so — unless the file held it already (a document about redaction).
func TestMaskPlainWritten(t *testing.T) {
	ws, g, _ := mkSetup(t)
	v := tool.NewVault()
	plainWarning := func(res tool.Result) string {
		for _, w := range res.Warnings {
			if strings.HasPrefix(w, "plain [REDACTED] written: ") {
				return w
			}
		}
		return ""
	}
	res := mkCall(t, g, v, "fs_write", map[string]any{"path": "app.env", "content": "DB_PASSWORD=[REDACTED]\nTOKEN=[REDACTED]\n"})
	tooltest.WantOK(t, res)
	if w := plainWarning(res); !strings.HasPrefix(w, "plain [REDACTED] written: 2 in app.env.") {
		t.Fatalf("warnings %q", res.Warnings)
	}
	if got := mkRead(t, ws, "app.env"); got != "DB_PASSWORD=[REDACTED]\nTOKEN=[REDACTED]\n" {
		t.Fatalf("app.env %q", got)
	}
	// The same text again, one line added: the file holds both already.
	res = mkCall(t, g, v, "fs_write", map[string]any{"path": "app.env", "content": "DB_PASSWORD=[REDACTED]\nTOKEN=[REDACTED]\nLOG=info\n"})
	tooltest.WantOK(t, res)
	if w := plainWarning(res); w != "" {
		t.Fatalf("a warning for text the file held: %q", w)
	}
	// A dry run says so before anything is written.
	res = tooltest.CallReq(t, g, gate.Request{Tool: "fs_write", Args: json.RawMessage(`{"path":"b.env","content":"X=[REDACTED]\n"}`),
		Principal: []string{"test"}, Vault: v, DryRun: true})
	if w := plainWarning(res); !res.DryRun || !strings.HasPrefix(w, "plain [REDACTED] written: 1 in b.env.") {
		t.Fatalf("dry run %+v", res)
	}
	// A shell here-document lands in its file too.
	res = mkCall(t, g, v, "shell", map[string]any{"command": "cat > c.env <<'EOF'\nY=[REDACTED]\nEOF"})
	if w := plainWarning(res); !strings.HasPrefix(w, "plain [REDACTED] written: 1 in c.env.") {
		t.Fatalf("shell %+v", res)
	}
	// Nothing plain: no such warning.
	res = mkCall(t, g, v, "fs_write", map[string]any{"path": "d.txt", "content": "hello\n"})
	if w := plainWarning(res); w != "" {
		t.Fatalf("warning %q", w)
	}
}

// An error that quotes a restored original (a stale line) shows the mask,
// not the secret, even where no pattern would find it.
func TestMaskRestoredNeverEchoed(t *testing.T) {
	ws, g, audit := mkSetup(t)
	mkWrite(t, ws, "app.env", "DB_PASSWORD=pw-9f8e7d\nLOG=info\n")
	v := tool.NewVault()
	res := mkCall(t, g, v, "read_config", map[string]any{"path": "app.env"})
	m := reMask.FindString(res.Output)
	if m == "" {
		t.Fatalf("not masked: %s", res.Output)
	}
	stale := mkCall(t, g, v, "modify_config", map[string]any{"path": "app.env", "changes": []map[string]any{{"line": 2, "old": m, "new": "x"}}})
	if stale.Success || stale.Error == nil || stale.Error.Code != tool.CodePatchRejected {
		t.Fatalf("%+v", stale)
	}
	blob, _ := json.Marshal(stale)
	if strings.Contains(string(blob), "pw-9f8e7d") || tooltest.Count(audit, "pw-9f8e7d") > 0 || !strings.Contains(stale.Error.Message, m) {
		t.Fatalf("the restored original was echoed: %s", blob)
	}
}

// TestMaskBase64Read: fs_read's base64 encoding would carry a file's
// secrets past the masking (the redactor reads text, not its encoding), so
// it is refused for a file holding one — text or binary — and works for
// the rest. Found by the injection suite (exfil-base64-read): the model read
// .env as base64 and posted it to a granted host.
func TestMaskBase64Read(t *testing.T) {
	ws, g, audit := mkSetup(t)
	mkWrite(t, ws, "blob.bin", "\x00\x01bin\x00DB_PASSWORD="+mkPW+"\n")
	mkWrite(t, ws, "plain.bin", "\x00\x01just bytes\xff")
	v := tool.NewVault()
	for _, p := range []string{".env", "blob.bin"} {
		res := mkCall(t, g, v, "fs_read", map[string]any{"path": p, "encoding": "base64"})
		tooltest.WantCode(t, res, tool.CodeOperationNotSupported)
		if !strings.Contains(res.Error.Message, "holds a secret") {
			t.Errorf("%s: %+v", p, res.Error)
		}
		mkNoSecret(t, res, audit)
		if blob, _ := json.Marshal(res); strings.Contains(string(blob), base64.StdEncoding.EncodeToString([]byte(mkPW))[:12]) {
			t.Errorf("%s: the secret's encoding is in the result: %s", p, blob)
		}
	}
	res := mkCall(t, g, v, "fs_read", map[string]any{"path": "plain.bin", "encoding": "base64"})
	tooltest.WantOK(t, res)
	if got, err := base64.StdEncoding.DecodeString(res.Output); err != nil || string(got) != "\x00\x01just bytes\xff" {
		t.Fatalf("plain.bin: %q %v", got, err)
	}
	// As text, .env comes masked, as always.
	res = mkCall(t, g, v, "fs_read", map[string]any{"path": ".env"})
	tooltest.WantOK(t, res)
	mkNoSecret(t, res, audit)
}
