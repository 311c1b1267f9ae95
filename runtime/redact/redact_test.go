package redact

import (
	"strings"
	"testing"
)

// Fake secrets of the right shapes. None of them is real.
const (
	openaiProj    = "sk-proj-Xq3vB7nK9mP2sL5tR8wY1zA4cD6fG0hJ_kM-eN7pQ2rS5tU8vW1xY4z"
	openaiSvc     = "sk-svcacct-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56Qr78St90"
	openaiLegacy  = "sk-3fK9xQ2mV7bN1cZ8lP4hR6tY0wE5uI2oA9sD3gJ7kL1qW4eR"
	anthropicKey  = "sk-ant-api03-Zx9Cv8Bn7Mm6Ll5Kk4Jj3Hh2Gg1Ff0Dd9Ss8Aa7Qq6Ww5Ee4Rr3Tt2Yy1-Uu0IiOoPpAA"
	awsKeyID      = "AKIAIOSFODNN7EXAMPLE"
	awsSessionID  = "ASIAY34FZKBOKMUTVV7A"
	awsSecret     = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
	ghp           = "ghp_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"
	githubPAT     = "github_pat_11ABCDEFG0123456789abc_defghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVW"
	glpat         = "glpat-Ab3De6Gh9Jk2Mn5Pq8St"
	slackBot      = "xoxb-2424242424-4242424242424-Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8"
	slackApp      = "xapp-1-A0123BCDEFG-1234567890123-abcdef0123456789abcdef0123456789"
	jwt           = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	stripeKey     = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
	googleKey     = "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
	hfToken       = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
	npmToken      = "npm_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Y"
	gitSHA        = "3f786850e387550fdab836ed7e6dc881de23001b"
	basicUserPass = "dXNlcjpodW50ZXIy" // user:hunter2
)

const rsaKey = `-----BEGIN RSA PRIVATE KEY-----
MIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aozN3tihPmljnnudb9G3HECdnH
lWu2/a1gB9JW5TBQ+AVpum9Okx7KfqkfBKL9mcHgSL0yWMdjMfNOqNtrQqKlN4kE
-----END RSA PRIVATE KEY-----`

func TestStringPatterns(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// PEM private keys
		{"rsa key", "key:\n" + rsaKey + "\ndone", "key:\n" + Mask + "\ndone"},
		{"openssh key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END OPENSSH PRIVATE KEY-----", Mask},
		{"ec key", "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6tF1aY/PuoAoGCCqGSM49\n-----END EC PRIVATE KEY-----", Mask},
		{"pkcs8 key", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----", Mask},
		{"encrypted key", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHzBJBgkqhkiG9w0BBQ0wPDAbBgkq\n-----END ENCRYPTED PRIVATE KEY-----", Mask},
		{"legacy encrypted key", "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,5A8D0C7B\n\nvKW0mC/Sn7A1\n-----END RSA PRIVATE KEY-----", Mask},
		{"pgp key", "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0Q7sQBCAC5\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----", Mask},
		{"truncated key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1c7+9z5Pad7O\nlWu2/a1gB9JW5TBQ (output truncated)", Mask + "(output truncated)"},
		{"json-escaped key", `"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN\n-----END PRIVATE KEY-----\n"`, `"` + Mask + `\n"`},
		{"two keys", rsaKey + "\nbetween\n" + rsaKey, Mask + "\nbetween\n" + Mask},

		// passwords in URLs
		{"postgres url", "DATABASE_URL=postgres://app:s3cr3t-Pa55@db.internal:5432/prod", "DATABASE_URL=postgres://app:" + Mask + "@db.internal:5432/prod"},
		{"redis url without user", "redis://:hunter2@cache:6379/0", "redis://:" + Mask + "@cache:6379/0"},
		{"unencoded @ in password", "mysql://root:p@ss@db/x", "mysql://root:" + Mask + "@db/x"},
		{"git clone with token", "git clone https://oauth2:" + glpat + "@gitlab.com/g/p.git", "git clone https://oauth2:" + Mask + "@gitlab.com/g/p.git"},

		// a header written into a path: masked when its value is one word with a digit
		{"header in a path", "open /tmp/x/Authorization: token 9f2c41aa77d0: no such file", "open /tmp/x/Authorization: token " + Mask + ": no such file"},

		// vendor tokens
		{"openai project key", "export OPENAI_API_KEY=" + openaiProj, "export OPENAI_API_KEY=" + Mask},
		{"openai service account key", "key " + openaiSvc + " rotated", "key " + Mask + " rotated"},
		{"openai legacy key", "using " + openaiLegacy, "using " + Mask},
		{"anthropic key", "x-api-key: " + anthropicKey, "x-api-key: " + Mask},
		{"anthropic key in prose", "the key " + anthropicKey + " leaked", "the key " + Mask + " leaked"},
		{"aws access key id", "aws_access_key_id = " + awsKeyID, "aws_access_key_id = " + Mask},
		{"aws session key id", "id=" + awsSessionID + ".", "id=" + Mask + "."},
		{"aws secret", "aws_secret_access_key = " + awsSecret, "aws_secret_access_key = " + Mask},
		{"aws secret env", "AWS_SECRET_ACCESS_KEY=" + awsSecret + "\nAWS_REGION=eu-west-1", "AWS_SECRET_ACCESS_KEY=" + Mask + "\nAWS_REGION=eu-west-1"},
		{"github classic token", "token " + ghp, "token " + Mask},
		{"github oauth, user, server, refresh", "gho_" + ghp[4:] + " ghu_" + ghp[4:] + " ghs_" + ghp[4:] + " ghr_" + ghp[4:], Mask + " " + Mask + " " + Mask + " " + Mask},
		{"github fine-grained token", "GH=" + githubPAT, "GH=" + Mask},
		{"gitlab token", "PRIVATE-TOKEN " + glpat, "PRIVATE-TOKEN " + Mask},
		{"gitlab deploy and runner tokens", "gldt-Ab3De6Gh9Jk2Mn5Pq8St glrt-Ab3De6Gh9Jk2Mn5Pq8St glptt-0123456789abcdef0123456789abcdef01234567", Mask + " " + Mask + " " + Mask},
		{"slack bot token", "SLACK_BOT_TOKEN " + slackBot, "SLACK_BOT_TOKEN " + Mask},
		{"slack user, app-level, refresh tokens", "xoxp-1234567890-abcdef xoxa-2-abcdefghijk xoxr-abcdefghij1 xoxs-abcdefghij1", Mask + " " + Mask + " " + Mask + " " + Mask},
		{"slack app token", "app " + slackApp, "app " + Mask},
		{"slack webhook", "POST https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX ok", "POST https://hooks.slack.com/services/" + Mask + " ok"},
		{"jwt", "id_token " + jwt + " expires", "id_token " + Mask + " expires"},
		{"jwt without signature", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", Mask},
		{"stripe key", "stripe: " + stripeKey, "stripe: " + Mask},
		{"google api key", "?key=" + googleKey + "&q=1", "?key=" + Mask + "&q=1"},
		{"hugging face token", "HF " + hfToken, "HF " + Mask},
		{"npm token", "//registry.npmjs.org/:_authToken=" + npmToken, "//registry.npmjs.org/:_authToken=" + Mask},
		// URL-encoded: the escape of "=", ":" or a quote separates a token
		// from the text before it (secrets at scale, cmd/warden).
		{"url-encoded token after %3D", "q=GITHUB_TOKEN%3D" + ghp + "&page=2", "q=GITHUB_TOKEN%3D" + Mask + "&page=2"},
		{"url-encoded json", "%7B%22id%22%3A+%22" + awsKeyID + "%22%2C+%22key%22%3A%22" + googleKey + "%22%7D",
			"%7B%22id%22%3A+%22" + Mask + "%22%2C+%22key%22%3A%22" + Mask + "%22%7D"},
		{"url-encoded export", "export+NPM_TOKEN%3d%22" + npmToken[:40] + "%22", "export+NPM_TOKEN%3d%22" + Mask + "%22"},

		// HTTP credentials
		{"bearer header", "Authorization: Bearer abc123.def456-ghi", "Authorization: Bearer " + Mask},
		{"github token scheme", `curl -H "Authorization: token ` + ghp + `" https://api.github.com`, `curl -H "Authorization: token ` + Mask + `" https://api.github.com`},
		{"basic header", "Authorization: Basic " + basicUserPass, "Authorization: Basic " + Mask},
		{"proxy authorization", "Proxy-Authorization: Basic " + basicUserPass + "\r\nHost: x", "Proxy-Authorization: Basic " + Mask + "\r\nHost: x"},
		{"authorization in json", `{"Authorization": "Bearer abc123def456"}`, `{"Authorization": "Bearer ` + Mask + `"}`},
		{"authorization without scheme", "authorization=abcdef", "authorization=" + Mask},
		{"cookie header", "Cookie: theme=dark; session=9f8e7d6c5b4a", "Cookie: " + Mask},
		{"set-cookie header", "Set-Cookie: id=a3fWa; Expires=Wed, 21 Oct 2015 07:28:00 GMT; Secure", "Set-Cookie: " + Mask},
		{"bearer in prose", "use Bearer 0a1b2c3d4e5f6a7b8c9d0e1f for the call", "use Bearer " + Mask + " for the call"},
		{"basic credentials in prose", "sent basic " + basicUserPass + " again", "sent basic " + Mask + " again"},
		{"curl -u", "curl -u admin:hunter2 https://x", "curl -u admin:" + Mask + " https://x"},
		{"curl --user=", "curl --user=bob:s3cret https://x", "curl --user=bob:" + Mask + " https://x"},

		// key/value pairs
		{"password=", "password=hunter2", "password=" + Mask},
		{"passwd, pwd", "passwd=a1 pwd=b2", "passwd=" + Mask + " pwd=" + Mask},
		{"token, secret", "token=t0k secret=s3c", "token=" + Mask + " secret=" + Mask},
		{"api_key, apikey", "api_key=k1&apikey=k2", "api_key=" + Mask + "&apikey=" + Mask},
		{"query string", "GET /v1/items?user=bob&access_token=abc123&page=2 HTTP/1.1", "GET /v1/items?user=bob&access_token=" + Mask + "&page=2 HTTP/1.1"},
		{"env file", "DB_HOST=db\nDB_PASSWORD=hunter2\nGITHUB_TOKEN=abc", "DB_HOST=db\nDB_PASSWORD=" + Mask + "\nGITHUB_TOKEN=" + Mask},
		{"export", "export MYSQL_ROOT_PASSWORD='root pw'", "export MYSQL_ROOT_PASSWORD='" + Mask + "'"},
		{"yaml", "db:\n  user: app\n  password: correct horse battery staple\n  port: 5432", "db:\n  user: app\n  password: " + Mask + "\n  port: 5432"},
		{"yaml quoted", `password: "p w"`, `password: "` + Mask + `"`},
		{"json-ish", `{"password": "hunter2", "user": "bob"}`, `{"password": "` + Mask + `", "user": "bob"}`},
		{"json-ish escaped quote", `{"secret": "a\"b", "n": 1}`, `{"secret": "` + Mask + `", "n": 1}`},
		{"json-ish number", `{"token": 12345, "x": 1}`, `{"token": ` + Mask + `, "x": 1}`},
		{"json-ish last member", `{"api_key":abc}`, `{"api_key":` + Mask + `}`},
		{"json in a json string", `"{\"password\":\"hunter2\"}"`, `"{\"password\":\"` + Mask + `\"}"`},
		// A value quoted inside a JSON string holds JSON's escapes: < > &
		// as \u003c \u003e \u0026, one level deeper \\u003c and \\\" (secrets
		// at scale, cmd/warden).
		{"escapes in a json string's value", `"SMTP_PASSWORD=\"r5a\u003clAIcm9oTfqOP+ANN\""`, `"SMTP_PASSWORD=\"` + Mask + `\""`},
		{"escapes two levels deep", `"{\"user\": \"bob\", \"password\": \"Uod\\u003c9d4\\\"w5e\\u0026fS\"}"`,
			`"{\"user\": \"bob\", \"password\": \"` + Mask + `\"}"`},
		{"python dict", `{'secret': 'abc', 'n': 1}`, `{'secret': '` + Mask + `', 'n': 1}`},
		{"flag", "mysql --password=hunter2 -u root", "mysql --password=" + Mask + " -u root"},
		{"header", "X-Api-Key: abc123\nAccept: */*", "X-Api-Key: " + Mask + "\nAccept: */*"},
		{"ini", "client_secret = abcdef\nclient_id = 42", "client_secret = " + Mask + "\nclient_id = 42"},
		{"private_key in toml", `private_key = "MIIEv"`, `private_key = "` + Mask + `"`},
		{"credentials", "credentials: user:pass", "credentials: " + Mask},
		{"hard-coded secret in code", `const apiKey = "k-123"`, `const apiKey = "` + Mask + `"`},
		{"comparison in code", `if password == "letmein" {`, `if password == "` + Mask + `" {`},
		{"passphrase", "passphrase: open sesame", "passphrase: " + Mask},
		{"rails secret_key_base", "SECRET_KEY_BASE=3Mx55ZAs6bZWyRLWYl5mIkVBnGLADY\n  secret_key_base: abc123", "SECRET_KEY_BASE=" + Mask + "\n  secret_key_base: " + Mask},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := String(tt.in)
			if got != tt.want {
				t.Errorf("String(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
			if again := String(got); again != got {
				t.Errorf("not idempotent: %q → %q", got, again)
			}
			if !Contains(tt.in) {
				t.Errorf("Contains(%q) = false", tt.in)
			}
			if Contains(got) {
				t.Errorf("Contains(%q) = true after redaction", got)
			}
		})
	}
}

func TestStringLeavesOrdinaryTextAlone(t *testing.T) {
	tests := []struct{ name, in string }{
		{"kebab-case words", "risk-management, task-force, disk-space, desk-top and ask-me-anything"},
		{"sk- words", "sk-learn and sk-abcdefghijklmnopqrstuvwxyz are not keys"},
		{"git shas", "commit " + gitSHA + "\nMerge: 3f78685 0fdab83\nparent " + strings.ToUpper(gitSHA)},
		{"uuid", "request 123e4567-e89b-12d3-a456-426614174000 done"},
		{"public key", "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----"},
		{"certificate", "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa\n-----END CERTIFICATE-----"},
		{"prose about keys", "Store the private key in a vault; rotate the API key and the token every 90 days."},
		{"password prompt", "Enter password:\nPassword reset link sent. Forgot password? Reset it."},
		{"llm usage", `{"max_tokens": 256, "prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}`},
		{"token counts", "max_tokens=256 max_tokens: 512 tokenizer: cl100k token_count=3 token_type: Bearer"},
		{"password hash key", "password_hash=$2b$12$abc password_policy: strict"},
		{"shell cwd", "PWD=/home/u/proj\nOLDPWD=/tmp\nHOME=/home/u"},
		{"code reading env", "token := os.Getenv(\"GITHUB_TOKEN\")\napi_key = os.environ[\"OPENAI_API_KEY\"]\npassword = get_password()"},
		{"type declarations", "interface Login {\n  password: string;\n  token: null\n  secret: boolean\n}"},
		{"go test output", "=== RUN   TestToken\n--- PASS: TestToken (0.00s)\nPASS\nok  \tpkg/token\t0.01s"},
		{"bearer in prose", "The bearer of this letter; a Bearer instrument is a document."},
		{"basic in prose", "Basic usage: run the tool. basic functionality works."},
		{"urls without passwords", "ssh://git@github.com:22/org/repo.git https://example.com:8443/a:b@c mailto:me@example.com"},
		{"slack words", "xoxb alone, xoxb-short, xapp-1-x, xoxb-this-is-not-a-token, xoxo-hugs-and-kisses"},
		{"gitlab-like words", "glpat-short glossy-finish-premium-paper-stock"},
		{"aws-like words", "AKIA alone, AKIAIOSFODNN7EXAMPL is short, xAKIAIOSFODNN7EXAMPLE is glued"},
		{"glued after a percent sign that is no escape", "x%3GAKIAIOSFODNN7EXAMPLE, x%AKIAIOSFODNN7EXAMPLE1"},
		{"github-like words", "ghp_short ghx_1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"},
		{"jwt-like", "eyJhbGciOiJIUzI1NiJ9 is one segment"},
		{"sort -u", "sort -u names.txt | uniq -c"},
		{"empty value", "password= token: \nPASSWORD=\n"},
		{"cookie prose", "the cookie policy applies"},
		{"base64 blob", "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="},
		{"already redacted", "password=" + Mask + "\nAuthorization: Bearer " + Mask + "\nhttps://u:" + Mask + "@h " + Mask + "\n" + Mask},
		{"empty", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := String(tt.in); got != tt.in {
				t.Errorf("String changed ordinary text:\n  in %q\n got %q", tt.in, got)
			}
			if Contains(tt.in) {
				t.Errorf("Contains(%q) = true", tt.in)
			}
		})
	}
}

func TestBytes(t *testing.T) {
	if Bytes(nil) != nil {
		t.Error("Bytes(nil) != nil")
	}
	in := []byte("token=abc")
	out := Bytes(in)
	if string(out) != "token="+Mask {
		t.Errorf("Bytes = %q", out)
	}
	if string(in) != "token=abc" {
		t.Error("Bytes modified its input")
	}
	same := []byte("nothing here")
	got := Bytes(same)
	got[0] = 'N'
	if same[0] != 'n' {
		t.Error("Bytes returned its input slice")
	}
}

func TestRedactorLiterals(t *testing.T) {
	const secret = "c0rrect-h0rse-battery"
	tests := []struct {
		name     string
		literals []string
		in, want string
	}{
		{"every occurrence", []string{secret}, "a " + secret + " b " + secret, "a " + Mask + " b " + Mask},
		{"inside a word", []string{secret}, "x" + secret + "y", "x" + Mask + "y"},
		{"adjacent occurrences merge", []string{secret}, secret + secret, Mask},
		{"overlapping occurrences", []string{"abababab"}, "ababababab", Mask},
		{"overlapping literals", []string{"12345678", "6789abcd"}, "0123456789abcdef", "0" + Mask + "ef"},
		{"short literals are ignored", []string{"short", ""}, "a short text", "a short text"},
		{"parts of the mask are ignored", []string{"REDACTED", "[REDACTED]"}, "REDACTED", "REDACTED"},
		{"re-formed across a mask", []string{"D]xxxxxx"}, "D]xxxxxxxxxxxx", Mask},
		{"patterns still apply", []string{secret}, "password=hunter2 " + secret, "password=" + Mask + " " + Mask},
		{"literal inside a pattern", []string{secret}, "token=" + secret + "&x=1", "token=" + Mask + "&x=1"},
		{"no literals", nil, "a " + secret, "a " + secret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.literals...)
			got := r.String(tt.in)
			if got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := r.String(got); again != got {
				t.Errorf("not idempotent: %q → %q", got, again)
			}
			for _, l := range r.literals {
				if strings.Contains(got, l) {
					t.Errorf("literal %q survived in %q", l, got)
				}
			}
			if string(r.Bytes([]byte(tt.in))) != got {
				t.Error("Bytes and String differ")
			}
			if r.Contains(tt.in) != (got != tt.in) {
				t.Errorf("Contains = %v", r.Contains(tt.in))
			}
		})
	}
}

func TestNilRedactor(t *testing.T) {
	var r *Redactor
	if got := r.String("token=abc"); got != "token="+Mask {
		t.Errorf("nil Redactor String = %q", got)
	}
	if got, err := r.JSON([]byte(`{"token":"abc"}`)); err != nil || string(got) != `{"token":"`+Mask+`"}` {
		t.Errorf("nil Redactor JSON = %s, %v", got, err)
	}
}

// TestWithSecrets: the originals of secrets are masked wherever they
// appear, each as its own kind; the redactor it extends is unchanged.
func TestWithSecrets(t *testing.T) {
	const pw, tok = "bVrXfvZOh9nclgWmVy4T", "c0rrect-h0rse-battery"
	base := New()
	r := base.WithSecrets(8, Secret{Kind: "url-password", Original: pw}, Secret{Kind: "token", Original: tok}, Secret{Kind: "password", Original: "short"})
	kinds := func(r *Redactor, s string) string {
		out, _ := r.Replace(s, func(kind, _ string, _ int) string { return FormatMask(kind, "0000") })
		return out
	}
	in := "fs.read:/ws/postgres:/app:" + pw + "@db and " + tok + " and short"
	want := "fs.read:/ws/postgres:/app:[REDACTED:url-password:0000]@db and [REDACTED:token:0000] and short"
	if got := kinds(r, in); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := kinds(r.WithLiterals(8, "and more text"), in+" and more text"); got != want+" [REDACTED:env-secret:0000]" {
		t.Errorf("a literal added after: %q", got)
	}
	if got := base.String(in); got != in {
		t.Errorf("the base redactor changed: %q", got)
	}
	// Quoted as Go's %q and JSON quote it: an error quoting an argument
	// escapes its escapes again.
	esc := Secret{Kind: "password", Original: `Yba#R1tXQ\u0026"70s<`}
	q := base.WithSecrets(8, esc)
	for _, in := range []string{`"missing/Yba#R1tXQ\\u0026\"70s<" does not exist`, `{"m": "Yba#R1tXQ\\u0026\"70s\u003c"}`} {
		if got := kinds(q, in); strings.Contains(got, "R1tXQ") || !strings.Contains(got, "[REDACTED:password:0000]") {
			t.Errorf("quoted: %q", got)
		}
	}
}

// TestShortLiteralsLeaveMasksAlone: a short literal (a short password
// masked wherever it is repeated) that is also part of a mask's own text —
// a kind's name, an id's digits, a piece of "[REDACTED]" — masks where it
// stands alone and leaves the masks as they are: the masks already there
// keep their ids, and the text is not masked whole.
func TestShortLiteralsLeaveMasksAlone(t *testing.T) {
	for _, pw := range []string{"url", "pass", "word", "00a1", "a", "ED:", "RED", "D]"} {
		r := New().WithSecrets(1, Secret{Kind: "url-password", Original: pw})
		n := 0
		out, found := r.Replace("x [REDACTED:url-password:00a1] and [REDACTED] then "+pw+" ok", func(kind, _ string, _ int) string {
			n++
			return FormatMask(kind, "0fff")
		})
		want := "x [REDACTED:url-password:00a1] and [REDACTED] then [REDACTED:url-password:0fff] ok"
		if pw == "a" {
			want = "x [REDACTED:url-password:00a1] [REDACTED:url-password:0fff]nd [REDACTED] then [REDACTED:url-password:0fff] ok"
		}
		if out != want || len(found) != n {
			t.Errorf("%q: got  %q (%d found)\nwant %q", pw, out, len(found), want)
		}
		if again := r.String(out); again != out {
			t.Errorf("%q: redacted again: %q", pw, again)
		}
	}
}

// TestCut: text cut short is never cut inside a secret, nor inside a
// UTF-8 sequence.
func TestCut(t *testing.T) {
	pad := strings.Repeat("x", 10) + "/"
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{pad + "T=" + ghp, 20, pad + "T="},                        // inside the token: cut before it
		{pad + "T=" + ghp, 11, pad},                               // before the secret
		{pad + "T=" + ghp + " tail", 55, pad + "T=" + ghp + " t"}, // after it
		{pad + "password=hunter2xyz", 25, pad + "password="},
		{"short", 10, "short"},
		{"éé", 3, "é"},
	} {
		if got := Cut(tt.s, tt.n); got != tt.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}
