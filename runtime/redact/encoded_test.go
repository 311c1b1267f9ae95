package redact

import (
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
)

// Secrets inside encoded text: every family, in its context, URL-encoded
// (once, twice, as a path) and in base64 (standard and URL-safe, with and
// without padding, wrapped across lines), nested (base64 of URL-encoded
// text and the other way round), placed alone, at the start and at the end
// of a text, inside a JSON string, inside a URL's query and in a path.

// encodedFamilies are the secrets: the text carrying each, and the secret
// itself (what must not be left in any form).
var encodedFamilies = []struct{ name, carrier, secret string }{
	{"github token in prose", "oops, pasted " + ghp + " into the chat", ghp},
	{"github fine-grained token", "GH=" + githubPAT, githubPAT},
	{"aws key id", "the deploy user's key is " + awsKeyID + ", rotate it", awsKeyID},
	{"aws secret", "AWS_SECRET_ACCESS_KEY=" + awsSecret, awsSecret},
	{"gitlab token", "GITLAB_TOKEN=" + glpat, glpat},
	{"slack token", "  slack_bot_token: " + slackBot, slackBot},
	{"slack webhook", "POST https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX", "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX"},
	{"stripe key", `export STRIPE_SECRET_KEY="` + stripeKey + `"`, stripeKey},
	{"openai key", "deploy --registry-login " + openaiProj + " --dry-run", openaiProj},
	{"anthropic key", "x-api-key: " + anthropicKey, anthropicKey},
	{"google api key", "https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key=" + googleKey, googleKey},
	{"hugging face token", "HF_TOKEN=" + hfToken, hfToken},
	{"npm token", "//registry.npmjs.org/:_authToken=" + npmToken, npmToken},
	{"jwt", `{"id_token": "` + jwt + `", "scope": "deploy"}`, jwt},
	{"private key", "# deploy key, do not share\n" + rsaKey, "MIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aozN3tihPmljnnudb9G3HECdnH"},
	{"url password", "DATABASE_URL=postgres://app:Zq8v-Lp3_wT9@db.internal:5432/prod", "Zq8v-Lp3_wT9"},
	{"password pair", "DB_PASSWORD=hunter2-Xy7", "hunter2-Xy7"},
	{"yaml password", "passwd: correct horse battery staple", "correct horse battery staple"},
	{"json password", `{"user": "bob", "password": "p@ss<w0rd>&!x"}`, "p@ss<w0rd>&!x"},
	{"toml token", `service_token = "Xk29fLq83nVbT7wPz4Rm"`, "Xk29fLq83nVbT7wPz4Rm"},
	{"rails secret", "SECRET_KEY_BASE=3Mx55ZAs6bZWyRLWYl5mIkVBnGLADY", "3Mx55ZAs6bZWyRLWYl5mIkVBnGLADY"},
	{"bearer header", "Authorization: Bearer 0a1b2c3d4e5f6a7b8c9d0e1f", "0a1b2c3d4e5f6a7b8c9d0e1f"},
	{"basic header", "Authorization: Basic " + basicUserPass, basicUserPass},
	{"curl -u", "curl -u admin:hunter2-Xy7 https://x", "hunter2-Xy7"},
	{"the shortest secret", "pwd=ab", "ab"},
}

// wrap breaks s into lines of n bytes, ending each but the last with nl.
func wrap(s string, n int, nl string) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + nl)
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}

// encoder is enc's EncodeToString for a string.
func encoder(enc *base64.Encoding) func(string) string {
	return func(s string) string { return enc.EncodeToString([]byte(s)) }
}

// encodings of a carrier; those holding base64 mask their whole run, the
// others the secret's own escapes.
var secretEncodings = []struct {
	name   string
	base64 bool
	enc    func(string) string
}{
	{"url", false, url.QueryEscape},
	{"url twice", false, func(s string) string { return url.QueryEscape(url.QueryEscape(s)) }},
	{"url path", false, url.PathEscape},
	{"base64", true, encoder(base64.StdEncoding)},
	{"base64 unpadded", true, encoder(base64.RawStdEncoding)},
	{"base64url", true, encoder(base64.URLEncoding)},
	{"base64url unpadded", true, encoder(base64.RawURLEncoding)},
	{"base64 of url", true, func(s string) string { return base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(s))) }},
	{"url of base64", true, func(s string) string { return url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(s))) }},
	{"url twice of base64", true, func(s string) string {
		return url.QueryEscape(url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(s))))
	}},
	{"base64 MIME lines", true, func(s string) string { return wrap(base64.StdEncoding.EncodeToString([]byte(s)), 76, "\r\n") }},
	{"base64 PEM lines", true, func(s string) string { return wrap(base64.StdEncoding.EncodeToString([]byte(s)), 64, "\n") }},
	{"base64 lines in a JSON string", true, func(s string) string { return wrap(base64.StdEncoding.EncodeToString([]byte(s)), 64, `\n`) }},
}

// placements put an encoded secret in a text.
var secretPlacements = []struct {
	name  string
	place func(string) string
}{
	{"alone", func(e string) string { return e }},
	{"at the start", func(e string) string { return e + " was in the log" }},
	{"at the end", func(e string) string { return "the log said: " + e }},
	{"in a JSON string", func(e string) string { return `{"data": "` + e + `", "n": 1}` }},
	{"in a URL's query", func(e string) string { return "GET https://example.com/cb?state=" + e + "&page=2 HTTP/1.1" }},
	{"in a path", func(e string) string { return "open missing/xxxxxxxxxx/" + e + ": no such file" }},
	{"on a line of its own", func(e string) string { return "begin\n" + e + "\nend" }},
	{"before a word on the next line", func(e string) string { return e + "\r\nXX" }},
}

// secretLeft returns what is left in out of an encoded secret: the
// secret, its escapes (for a URL encoding: the encoding of the secret
// alone), or twelve bytes in a row of a base64 run.
func secretLeft(out, secret, encoded string, b64 bool, enc func(string) string) string {
	if strings.Contains(out, secret) {
		return secret
	}
	if !b64 {
		if e := enc(secret); strings.Contains(out, e) {
			return e
		}
		return ""
	}
	for _, line := range strings.FieldsFunc(encoded, func(r rune) bool { return r == '\r' || r == '\n' || r == '\\' }) {
		for i := 0; i+12 <= len(line); i += 6 {
			if strings.Contains(out, line[i:i+12]) {
				return line[i : i+12]
			}
		}
	}
	return ""
}

// TestEncodedSecrets: decoded text is read with the same rules as text
// that was not encoded, so a secret encoded is masked wherever it is when
// not encoded. (The only placement where it is not: a YAML line's value
// of plain words, passwd: correct horse battery staple, written after a
// path's or a query's name, where it is no YAML line.)
func TestEncodedSecrets(t *testing.T) {
	cases := 0
	defer func() { t.Logf("%d cases", cases) }()
	for _, fam := range encodedFamilies {
		if String(fam.carrier) == fam.carrier {
			t.Fatalf("%s: the carrier itself is not masked: %q", fam.name, fam.carrier)
		}
		for _, en := range secretEncodings {
			encoded := en.enc(fam.carrier)
			for _, pl := range secretPlacements {
				if en.name == "base64 lines in a JSON string" && pl.name != "in a JSON string" {
					continue
				}
				if strings.Contains(String(pl.place(fam.carrier)), fam.secret) {
					continue // not masked when not encoded either
				}
				cases++
				text := pl.place(encoded)
				name := fam.name + "/" + en.name + "/" + pl.name
				out := String(text)
				if left := secretLeft(out, fam.secret, encoded, en.base64, en.enc); left != "" {
					t.Errorf("%s: %q left in\n%q", name, left, out)
					continue
				}
				if again := String(out); again != out {
					t.Errorf("%s: not idempotent:\n%q\n%q", name, out, again)
				}
				if Contains(out) {
					t.Errorf("%s: Contains(%q) after redaction", name, out)
				}
				named, secrets := plain.Replace(text, func(kind, _ string, _ int) string { return FormatMask(kind, "3f9a") })
				back := named
				for _, sc := range secrets {
					back = strings.Replace(back, sc.Mask, sc.Original, 1)
				}
				if back != text {
					t.Errorf("%s: masks do not give the text back:\n%q\n%q", name, text, back)
				}
			}
			// The same through a JSON document's walk.
			doc, _ := json.Marshal(map[string]string{"output": "the log said: " + strings.ReplaceAll(encoded, `\n`, "\n")})
			red, err := JSON(doc)
			if err != nil {
				t.Fatal(err)
			}
			var back map[string]string
			if err := json.Unmarshal(red, &back); err != nil {
				t.Fatal(err)
			}
			if left := secretLeft(back["output"], fam.secret, encoded, en.base64, en.enc); left != "" {
				t.Errorf("%s/%s/JSON: %q left in %s", fam.name, en.name, left, red)
			}
		}
	}
}

// TestEncodedSecretsCut: a text cut short in the middle of an encoded
// secret is cut before it: before a base64 run, before the escapes of a
// URL-encoded secret.
func TestEncodedSecretsCut(t *testing.T) {
	const prefix = "missing/xxxxxxxxxx/"
	for _, fam := range encodedFamilies {
		if strings.Contains(String(prefix+fam.carrier), fam.secret) {
			continue // not masked when not encoded either
		}
		for _, en := range secretEncodings {
			encoded := en.enc(fam.carrier)
			text := prefix + encoded
			from, to := len(prefix), len(text) // the base64 run
			if !en.base64 {
				from = strings.Index(text, en.enc(fam.secret))
				to = from + len(en.enc(fam.secret))
			}
			for _, n := range []int{(from + to) / 2, from + 1, to - 1} {
				if got := Cut(text, n); len(got) > from {
					t.Errorf("%s/%s: cut at %d inside the secret (%d-%d): %q", fam.name, en.name, n, from, to, got)
				}
			}
		}
	}
}

// TestEncodedLiteral: a literal (a secret of the environment) is found in
// encoded text too.
func TestEncodedLiteral(t *testing.T) {
	r := New("my-env-secret-value")
	for _, text := range []string{
		base64.StdEncoding.EncodeToString([]byte("x my-env-secret-value y")),
		url.QueryEscape("value: my-env-secret-value!"),
	} {
		if out := r.String(text); out == text {
			t.Errorf("%q not masked", text)
		}
	}
}

// TestEncodedOrdinaryText: decoding finds nothing in what holds no
// secret — prose, code, hashes, identifiers, random bytes, format
// strings, URLs — encoded or not.
func TestEncodedOrdinaryText(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 48)
	for i := range random {
		random[i] = byte(rnd.UintN(256))
	}
	b64 := base64.StdEncoding.EncodeToString
	texts := []string{
		b64([]byte("hello, this is a perfectly ordinary sentence about keys and tokens")),
		b64([]byte("Enter password: ")),
		b64([]byte(`token := os.Getenv("GITHUB_TOKEN")`)),
		b64([]byte(`{"max_tokens": 256, "prompt_tokens": 10}`)),
		b64(random), base64.RawURLEncoding.EncodeToString(random),
		url.QueryEscape(`c := client{apiKey: cfg.APIKey, token: token}`),
		url.QueryEscape("reset my password?"),
		"https://example.com/search?q=hello%20world&lang=en%2Dus&next=%2Fhome%2Fuser",
		`fmt.Sprintf("%02x:%2d %s %3Dx", a, b, c)`,
		"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		"sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg==",
		"TestPrecisionCorpusStandardLibrary github.com/wardenrt/warden/runtime/redact /usr/local/lib/python3.11/site-packages",
		"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
		wrap(b64(random), 64, "\n") + "\n" + wrap(b64([]byte(strings.Repeat("ordinary text, nothing secret. ", 5))), 64, "\n"),
		"%5BREDACTED%5D " + b64([]byte("password=[REDACTED]")),
	}
	for _, text := range texts {
		if got := String(text); got != text {
			t.Errorf("String changed ordinary text:\n  in %q\n got %q", text, got)
		}
	}
}

// TestEncodedNoCandidateAllocatesNothing: where a text holds no run that
// may be decoded — no percent escape, no run of base64 decoding to text
// (identifiers, hashes, paths, a binary blob) — reading its runs costs no
// allocation.
func TestEncodedNoCandidateAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops what it is given")
	}
	code := "func (c *Client) login(ctx context.Context, cfg Config) error {\n\tfor _, cookie := range c.jar.Cookies(c.base) {\n" +
		"\t\tc.log.Debug(\"cookie\", \"name\", cookie.Name)\n\t}\n\ttoken := cfg.Token\n\tc.auth = &auth{apiKey: cfg.APIKey, token: token}\n" +
		"\treturn nil\n}\n// TestPrecisionCorpusStandardLibrary /usr/local/lib/python3.11/site-packages 3f786850e387550fdab836ed7e6dc881de23001b\n"
	blob := "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==\n"
	for _, text := range []string{strings.Repeat(code, 200), strings.Repeat(blob, 200), typicalText(64 << 10)} {
		with := testing.AllocsPerRun(10, func() { plain.find(text) })
		without := testing.AllocsPerRun(10, func() { plain.findDepth(text, maxDecodes) })
		if with > without {
			t.Errorf("reading the runs of %.40q… made %.0f allocations, %.0f without", text, with, without)
		}
	}
}

// TestMinSecretLen: the fewest bytes decoded text is read for is the
// shortest match of the rules — a key-value pair of the shortest keyword,
// a separator and one byte — and the shortest secret the rules mask,
// base64 in the fewest characters that hold it, is found.
func TestMinSecretLen(t *testing.T) {
	if got, want := minSecretLen(), len("pwd")+len("=")+1; got != want {
		t.Errorf("minSecretLen() = %d, want %d", got, want)
	}
	if got := minBase64Run(minSecretLen()); got != 7 {
		t.Errorf("minBase64Run = %d, want 7", got)
	}
	for _, text := range []string{"cHdkPWFi", "cHdkPWFi==", "(cHdkPWFi)", "pwd%3Dab"} {
		if String(text) == text {
			t.Errorf("%q (pwd=ab) not masked", text)
		}
	}
}
