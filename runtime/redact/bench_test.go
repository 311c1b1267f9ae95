package redact

import (
	"strings"
	"testing"
	"time"
)

// typicalText is what tool output and logs look like: prose, log lines,
// code, a diff, command output, and now and then a secret.
func typicalText(size int) string {
	chunk := `2024-05-01T12:00:00Z INFO gate: call fs_read path=notes/todo.md bytes=1834 duration_ms=3
2024-05-01T12:00:01Z INFO gate: call shell command="go test ./..." exit_code=0
=== RUN   TestParse
--- PASS: TestParse (0.00s)
ok  	github.com/example/project/parse	0.012s
commit 3f786850e387550fdab836ed7e6dc881de23001b
Author: A Developer <dev@example.com>
    Fix the risk-management report and the task-force schedule.
diff --git a/config.go b/config.go
@@ -10,7 +10,7 @@ func Load() (*Config, error) {
-	token := os.Getenv("GITHUB_TOKEN")
+	token := os.Getenv("WARDEN_TOKEN")
 	return &Config{Token: token, MaxTokens: 256}, nil
The summary: the agent read 12 files, ran the tests and proposed a patch. It
asked for approval before writing notes/plan.md and before running git commit.
{"model": "gpt-4o-mini", "max_tokens": 512, "usage": {"prompt_tokens": 812, "completion_tokens": 96}}
curl -s https://api.example.com/v1/items?page=2 -H "Accept: application/json"
DATABASE_URL=postgres://app:s3cr3t@db.internal:5432/prod
Authorization: Bearer 0a1b2c3d4e5f6a7b8c9d0e1f
`
	var b strings.Builder
	for b.Len() < size {
		b.WriteString(chunk)
	}
	return b.String()[:size]
}

func BenchmarkString(b *testing.B) {
	for _, bc := range []struct {
		name string
		size int
	}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}} {
		text := typicalText(bc.size)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				String(text)
			}
		})
	}
	// Text with no candidate for any pattern: the filters skip every rule.
	plainText := strings.Repeat("The quick brown fox jumps over the lazy dog. ", (1<<20)/45)
	b.Run("1MiB-plain", func(b *testing.B) {
		b.SetBytes(int64(len(plainText)))
		for b.Loop() {
			String(plainText)
		}
	})
	// Hostile input: runs of anchors that start matches and fail late, which
	// a naive candidate-by-candidate scan would read quadratically often.
	for _, h := range []struct{ name, unit string }{
		{"jwt", "eyJ-"}, {"glued-sk", "asdsk-"}, {"sk-proj", "-sk-proj-"}, {"password", "password="},
		{"url", "://a:"}, {"bearer", "Bearer x."}, {"pem", "-----BEGIN RSA PRIVATE KEY-----"},
		{"one-line-json", longLineUnits[0]}, {"one-line-args", longLineUnits[1]}, {"one-line-masks", longLineUnits[4]},
	} {
		hostile := strings.Repeat(h.unit, (1<<20)/len(h.unit))
		b.Run("1MiB-hostile-"+h.name, func(b *testing.B) {
			b.SetBytes(int64(len(hostile)))
			for b.Loop() {
				String(hostile)
			}
		})
	}
	// Many literals, as from a large environment.
	lits := make([]string, 32)
	for i := range lits {
		lits[i] = strings.Repeat(string(rune('a'+i%26)), 12) + "-secret"
	}
	r := New(lits...)
	text := typicalText(1 << 20)
	b.Run("1MiB-32-literals", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			r.String(text)
		}
	})
}

func BenchmarkJSON(b *testing.B) {
	doc := []byte(`{"tool":"http","args":{"method":"GET","url":"https://api.example.com/v1/items?access_token=abc123","headers":{"Authorization":"Bearer 0a1b2c3d4e5f","Accept":"application/json"}},"output":"` +
		strings.Repeat(`line of output with nothing secret in it\n`, 80) + `","usage":{"prompt_tokens":812,"completion_tokens":96}}`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := JSON(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplace masks configuration with a secret every few lines, as
// the gate does (named masks), and code with none.
func BenchmarkReplace(b *testing.B) {
	env := strings.Repeat("APP_NAME=warden-bench\nDEBUG=false\nDB_HOST=db.internal\nDB_PASSWORD=s3cr3t-Pa55w0rd-x1\n"+
		"AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\nGITHUB_TOKEN=ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R\nLOG_LEVEL=info\n", (1<<20)/200)
	code := strings.Repeat("func (c *Client) login(ctx context.Context, cfg Config) error {\n\tfor _, cookie := range c.jar.Cookies(c.base) {\n"+
		"\t\tc.log.Debug(\"cookie\", \"name\", cookie.Name)\n\t}\n\ttoken := cfg.Token\n\tc.auth = &auth{apiKey: cfg.APIKey, token: token}\n\treturn nil\n}\n", (1<<20)/260)
	named := func(kind, _ string, _ int) string { return FormatMask(kind, "3f9a") }
	for _, bc := range []struct{ name, text string }{{"env-1MiB", env}, {"code-1MiB", code}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.text)))
			for b.Loop() {
				plain.Replace(bc.text, named)
			}
		})
	}
}

// longLineUnits make one line of many keys or secrets (minified JSON, a
// long log line): each key's line, the brackets open before it and each
// mask's window are found reading on, not from the line's start again.
var longLineUnits = []string{
	`{"user_token":"Xk29fLq83nVbT7wPz4Rm"},`, `f(a, password=Xk29fLq83nVbT7wPz4Rm), `, `x sk-a eyJa ghp_1 `,
	`{"a": "see the password: none"}, `, `x ghp_0123456789abcdefghijABCDEFGHIJ012345-y `,
}

// TestLongLineIsLinear: 1 MiB on one line is redacted in well under a
// second a unit (it took minutes when each key read its line from the
// start: secrets at scale, cmd/warden). The bound is loose, for loaded
// machines; a quadratic pass is thousands of times slower.
func TestLongLineIsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("redacts 5 MiB")
	}
	start := time.Now()
	for _, unit := range longLineUnits {
		s := strings.Repeat(unit, (1<<20)/len(unit))
		if masked := String(s) != s; masked != (String(unit) != unit) {
			t.Errorf("%q…: masked %v, alone %v", unit, masked, !masked)
		}
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("5 MiB of long lines took %v", d)
	}
}
