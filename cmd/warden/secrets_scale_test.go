package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/internal/llmtest"
	"github.com/wardenrt/warden/runtime/redact"
)

// Secrets at scale (issue 17): 210 secrets of 15 families — each a shape
// and a context (an .env line, YAML, JSON, an INI/TOML line, a header, a
// command line, prose) — are sent in 4 encodings (plain, URL-encoded, as a
// JSON string, base64) through 13 paths of one home: tool arguments (warden
// call fs_write, then fs_read), tool outputs (read_files, a shell's cat),
// memory (write_memory, query_memory), a warden run's task, its model's
// answer and tool-call arguments, a workflow's params echoed by its steps,
// and errors (paths that do not exist, quoted whole or cut short in the
// middle of the secret; paths outside the grants; an http call to a refused
// host; arguments the schema refuses). Every (secret, encoding, path) case
// gets a body of its own — same family, shape and context, random-looking,
// from a fixed random source — so that a hit on disk names exactly one case. Then
// every byte on disk is searched, for every case's value as it is, URL-
// encoded, JSON-escaped (once and twice), in base64, and a random part of
// it in any case: the home (the raw bbolt file with its free pages, the
// audit anchor, the log file), the audit export, each run's export (the
// workflow's records too), the workspace but for the files the test wrote
// itself or asked fs_write to write (they hold the secrets, as asked), and
// the TMPDIR, HOME and XDG directories the test gives warden.
//
// What is expected on disk is what warden promises (docs/redaction.md):
// zero hits for every case whose text, as its path carries it, the detector
// masks, and no decoded form of any case. Which encodings it handles is
// measured, not assumed: the text carrying each secret, in each of the
// four encodings, must be masked (the test fails otherwise: the redactor
// decodes URL-encoded and base64 runs); where a path carries it in a
// context the detector does not read as a secret (a header's name inside
// a path), the cases it does not mask are counted and reported as the
// gap, not failed.
const scaleSeed = 17

// A scaleSecret is one secret's shape and context; gen makes one instance.
type scaleSecret struct {
	family string
	// gen returns the secret's value, the text carrying it (which holds the
	// value, or its JSON escape when the context is JSON), and a part of
	// the value that is random (ten bytes of letters and digits), searched
	// for in any case.
	gen func(r *rand.Rand) (value, carrier, part string)
}

const (
	alnum    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b64chars = alnum + "+/"
	urlsafe  = alnum + "-_"
)

// rnd returns n bytes drawn from set.
func rnd(r *rand.Rand, set string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = set[r.IntN(len(set))]
	}
	return string(b)
}

// randomLooking is rnd that looks random to a reader (and to the
// detector's "looks random" test): four letters or more and at least two
// separate groups of digits.
func randomLooking(r *rand.Rand, set string, n int) string {
	for {
		s := rnd(r, set, n)
		letters, runs, prev := 0, 0, false
		for i := 0; i < len(s); i++ {
			d := s[i] >= '0' && s[i] <= '9'
			if d && !prev {
				runs++
			}
			if !d && (s[i]|0x20) >= 'a' && (s[i]|0x20) <= 'z' {
				letters++
			}
			prev = d
		}
		if letters >= 4 && runs >= 2 {
			return s
		}
	}
}

// jsonEscape is s as JSON writes it inside a string, without the quotes.
func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// tokenSecrets: a provider's token (made by body) in six contexts, one per
// secret: an .env line, YAML, a JSON member, a quoted export, prose and a
// command line.
func tokenSecrets(family, env string, n int, body func(r *rand.Rand, i int) (value, part string)) []scaleSecret {
	name := strings.ToLower(env)
	contexts := []string{env + "=%s", "  " + name + ": %s", `{"` + name + `": "%s", "scope": "deploy"}`,
		"export " + env + `="%s"`, "oops, pasted %s into the chat", "deploy --registry-login %s --dry-run"}
	var out []scaleSecret
	for i := range n {
		ctx := contexts[i%len(contexts)]
		out = append(out, scaleSecret{family: family, gen: func(r *rand.Rand) (string, string, string) {
			v, part := body(r, i)
			return v, fmt.Sprintf(ctx, v), part
		}})
	}
	return out
}

// contextSecrets: a value (made by body) in the given contexts, one per
// secret, cycling. A context that is JSON gets the value JSON-escaped.
func contextSecrets(family string, n int, contexts []string, body func(r *rand.Rand, i int) (value, part string)) []scaleSecret {
	var out []scaleSecret
	for i := range n {
		ctx := contexts[i%len(contexts)]
		out = append(out, scaleSecret{family: family, gen: func(r *rand.Rand) (string, string, string) {
			v, part := body(r, i)
			if strings.HasPrefix(ctx, "{") {
				return v, fmt.Sprintf(ctx, jsonEscape(v)), part
			}
			return v, fmt.Sprintf(ctx, v), part
		}})
	}
	return out
}

// prefixed: a token of a fixed prefix and a random body from set.
func prefixed(prefixes []string, set string, n int) func(r *rand.Rand, i int) (string, string) {
	return func(r *rand.Rand, i int) (string, string) {
		body := randomLooking(r, set, n)
		return prefixes[i%len(prefixes)] + body, body[2:12]
	}
}

// scaleSecrets returns the 210 secrets: 15 families of 14.
func scaleSecrets() []scaleSecret {
	const n = 14
	var all []scaleSecret
	// Cloud keys: AWS access key ids and secret access keys (7 pairs),
	// Google API keys.
	awsIDs := contextSecrets("aws", n/2, []string{"AWS_ACCESS_KEY_ID=%s", "aws_access_key_id = %s",
		`{"AccessKeyId": "%s", "Region": "eu-west-1"}`, "the deploy user's key is %s, rotate it"},
		func(r *rand.Rand, i int) (string, string) {
			body := rnd(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
			return []string{"AKIA", "ASIA"}[i%2] + body, body[3:13]
		})
	awsKeys := contextSecrets("aws", n/2, []string{"AWS_SECRET_ACCESS_KEY=%s", "aws_secret_access_key = %s",
		`{"SecretAccessKey": "%s"}`, "  secret_access_key: %s"},
		func(r *rand.Rand, i int) (string, string) {
			v := randomLooking(r, b64chars, 40)
			return v, firstRun(v, 10)
		})
	for i := range awsIDs {
		all = append(all, awsIDs[i], awsKeys[i])
	}
	all = append(all, contextSecrets("gcp", n, []string{"GOOGLE_API_KEY=%s",
		"https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key=%s",
		`{"apiKey": "%s", "authDomain": "app.firebaseapp.com"}`, "  maps_key: %s", "restricted key %s to our referrers"},
		func(r *rand.Rand, i int) (string, string) {
			body := randomLooking(r, urlsafe, 35)
			return "AIza" + body, firstRun(body, 10)
		})...)
	// Provider tokens.
	all = append(all, tokenSecrets("github", "GITHUB_TOKEN", n, func(r *rand.Rand, i int) (string, string) {
		if i%2 == 1 {
			a, b := randomLooking(r, alnum, 22), randomLooking(r, alnum, 59)
			return "github_pat_" + a + "_" + b, b[20:30]
		}
		return prefixed([]string{"ghp_", "gho_", "ghs_"}, alnum, 36)(r, i/2)
	})...)
	all = append(all, tokenSecrets("gitlab", "GITLAB_TOKEN", n, prefixed([]string{"glpat-", "gldt-"}, alnum, 20))...)
	all = append(all, tokenSecrets("slack", "SLACK_BOT_TOKEN", n, func(r *rand.Rand, i int) (string, string) {
		tail := randomLooking(r, alnum, 24)
		return []string{"xoxb-", "xoxp-"}[i%2] + rnd(r, "0123456789", 11) + "-" + rnd(r, "0123456789", 13) + "-" + tail, tail[4:14]
	})...)
	all = append(all, tokenSecrets("stripe", "STRIPE_SECRET_KEY", n, prefixed([]string{"sk_live_", "rk_live_"}, alnum, 32))...)
	all = append(all, tokenSecrets("openai-anthropic", "OPENAI_API_KEY", n, func(r *rand.Rand, i int) (string, string) {
		if i%2 == 1 {
			body := randomLooking(r, alnum, 86)
			return "sk-ant-api03-" + body + "-" + rnd(r, alnum, 6) + "AA", body[30:40]
		}
		return prefixed([]string{"sk-proj-", "sk-svcacct-"}, alnum, 48)(r, i)
	})...)
	all = append(all, tokenSecrets("npm", "NPM_TOKEN", n, prefixed([]string{"npm_"}, alnum, 36))...)
	all = append(all, tokenSecrets("huggingface", "HF_TOKEN", n, prefixed([]string{"hf_"}, alnum, 34))...)
	// JWTs.
	all = append(all, tokenSecrets("jwt", "ID_TOKEN", n, func(r *rand.Rand, i int) (string, string) {
		enc := base64.RawURLEncoding.EncodeToString
		head := enc([]byte(`{"alg":"HS256","typ":"JWT"}`))
		body := enc([]byte(fmt.Sprintf(`{"sub":"%s","iat":%d,"scope":"read write"}`, randomLooking(r, alnum, 12), 1700000000+r.IntN(1e7))))
		sig := randomLooking(r, urlsafe, 43)
		return head + "." + body + "." + sig, firstRun(sig, 10)
	})...)
	// PEM private keys: the block alone, after a comment, or in a JSON
	// member (a service account's key file: its newlines escaped).
	all = append(all, contextSecrets("pem", n, []string{"%s", "# deploy key, do not share\n%s", `{"type": "service_account", "private_key": "%s"}`},
		func(r *rand.Rand, i int) (string, string) {
			typ := []string{"RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY", "ENCRYPTED PRIVATE KEY"}[i%5]
			var b strings.Builder
			b.WriteString("-----BEGIN " + typ + "-----\n")
			first := "MII" + rnd(r, b64chars, 61)
			b.WriteString(first + "\n")
			for range 4 {
				b.WriteString(rnd(r, b64chars, 64) + "\n")
			}
			b.WriteString(rnd(r, b64chars, 22) + "==\n-----END " + typ + "-----")
			return b.String(), firstRun(first[3:], 10)
		})...)
	// Passwords in URLs.
	all = append(all, contextSecrets("url-password", n, []string{"DATABASE_URL=postgres://app:%s@db.internal:5432/prod",
		"git clone https://deploy:%s@git.example.com/acme/app.git", "  url: redis://default:%s@cache:6379/0",
		`{"broker": "amqp://guest:%s@mq.internal:5672/"}`},
		func(r *rand.Rand, i int) (string, string) {
			v := randomLooking(r, alnum+"-_.~", 20)
			return v, firstRun(v, 10)
		})...)
	// password= / passwd: pairs; in quoted contexts the password holds
	// characters that need escaping in JSON or in a URL.
	pwContexts := []string{"DB_PASSWORD=%s", "passwd: %s", `{"user": "bob", "password": "%s"}`, "mysql -u root --password=%s app",
		"export PGPASSWORD='%s'", "password = %s", `SMTP_PASSWORD="%s"`}
	all = append(all, contextSecrets("password", n, pwContexts, func(r *rand.Rand, i int) (string, string) {
		v := randomLooking(r, alnum, 18)
		if ctx := pwContexts[i%len(pwContexts)]; strings.Contains(ctx, `"%s"`) || strings.Contains(ctx, `'%s'`) {
			sp := "!#&*+<>@^~"
			v = v[:3] + string(sp[r.IntN(len(sp))]) + v[3:15] + string(sp[r.IntN(len(sp))]) + v[15:]
		}
		return v, firstRun(v[4:], 10)
	})...)
	// High-entropy values after names like secret, token, api_key, in env
	// files, YAML, JSON, TOML and headers.
	all = append(all, contextSecrets("secret-token-api-key", n, []string{"CLIENT_SECRET=%s", "api_key: %s",
		`{"access_token": "%s", "expires_in": 3600}`, `service_token = "%s"`, "  webhook_secret: %s", "X-Api-Key: %s", "SECRET_KEY_BASE=%s"},
		func(r *rand.Rand, i int) (string, string) {
			v := randomLooking(r, alnum, 24+i)
			return v, firstRun(v, 10)
		})...)
	// Authorization headers and Bearer tokens.
	all = append(all, contextSecrets("authorization", n, []string{"Authorization: Bearer %s",
		`curl -H "Authorization: Bearer %s" https://api.example.com/v1/items`, `{"headers": {"Authorization": "Bearer %s"}}`,
		"Authorization: Basic %s", "Authorization: token %s", "the proxy forwarded Bearer %s upstream"},
		func(r *rand.Rand, i int) (string, string) {
			if i%6 == 3 {
				pw := randomLooking(r, alnum, 16)
				return base64.StdEncoding.EncodeToString([]byte(rnd(r, "abcdefghijklmnopqrstuvwxyz", 6) + ":" + pw)), ""
			}
			v := randomLooking(r, alnum+"-._", 40)
			return v, firstRun(v, 10)
		})...)
	return all
}

// firstRun returns the first n bytes of s that are letters and digits in a
// row ("" if there are none).
func firstRun(s string, n int) string {
	start := 0
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(alnum, rune(s[i])) {
			start = i + 1
			continue
		}
		if i+1-start == n {
			return s[start : i+1]
		}
	}
	return ""
}

// The encodings: the text carrying a secret as it is, URL-encoded (a
// query's or a form's value), as a JSON string (the escapes JSON uses,
// quotes included), and base64.
var scaleEncodings = []struct {
	name string
	enc  func(string) string
}{
	{"plain", func(s string) string { return s }},
	{"url", url.QueryEscape},
	{"json", func(s string) string { b, _ := json.Marshal(s); return string(b) }},
	{"base64", func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }},
}

// The paths each case goes through.
const (
	pathArgs       = iota // warden call fs_write --args {content}, then fs_read of the file
	pathReadFiles         // a file read with read_files (tool output)
	pathShellCat          // a file printed by a shell cat (tool output)
	pathMemory            // write_memory, then query_memory
	pathModelTask         // a warden run's task
	pathModelReply        // the model's answer
	pathModelArgs         // the model's tool call's arguments (analyze)
	pathWorkflow          // a workflow's --param, echoed by a step
	pathErrMissing        // the model's read_files of paths that do not exist, the secret in the path (each file's error)
	pathErrHTTP           // warden call http to a refused host, the secret in the query
	pathErrInvalid        // warden call refused as INVALID_INPUT, the secret in its arguments
	pathErrDenied         // the model's read_files of paths outside the grants (CAPABILITY_DENIED naming them)
	pathErrCut            // as pathErrMissing, each error quoting its path cut short in the middle of the secret
	numPaths
)

var scalePathNames = [numPaths]string{"args (fs_write→fs_read)", "output (read_files)", "output (shell cat)", "memory",
	"model task", "model reply", "model tool-call args", "workflow param", "error (missing path)", "error (http refused)",
	"error (invalid args)", "error (denied path)", "error (path cut short)"}

// A scaleCase is one secret in one encoding through one path.
type scaleCase struct {
	secret, enc, path int
	value, part       string
	sent              string // the carrier, encoded
	needles           map[string]string
	promised          bool // the detector masks it as the path carries it
}

// carried is the text in which a path carries a case, for the detector's
// verdict: a query parameter named for a secret (http's params, in JSON),
// a path under missing/, or the text as sent.
func (c *scaleCase) carried() (string, bool) {
	switch c.path {
	case pathErrHTTP:
		b, _ := json.Marshal(map[string]any{"params": map[string]string{c.paramName(): c.sent}})
		return string(b), true
	case pathErrMissing:
		return "missing/" + c.sent, false
	case pathErrDenied:
		return "/outside-scale/" + c.sent, false
	case pathErrCut:
		return c.cutPath(), false
	}
	return c.sent, false
}

// quoteCut is where warden cuts a path it quotes in a message
// (builtin/internal/fspath.Quote).
const quoteCut = 200

// cutPath is a missing path whose quote in an error is cut in the middle
// of the case's value, as sent.
func (c *scaleCase) cutPath() string {
	mid := len(c.sent) / 2
	for _, form := range []string{"plain", "url", "json", "base64-in-carrier"} {
		if i := strings.Index(c.sent, c.needles[form]); c.needles[form] != "" && i >= 0 {
			mid = i + len(c.needles[form])/2
			break
		}
	}
	pad := max(quoteCut-len("missing/")-1-mid, 1)
	return "missing/" + strings.Repeat("x", pad) + "/" + c.sent
}

func (c *scaleCase) paramName() string { return fmt.Sprintf("s%03d_token", c.secret) }

// makeNeedles returns the forms of a case's value searched for on disk: as
// it is, URL-encoded, JSON-escaped (once and twice), base64 (alone, and as
// the bytes of the sent base64 that only the value determines), and its
// random part (in any case).
func makeNeedles(value, carrier, part string) map[string]string {
	n := map[string]string{"plain": value, "url": url.QueryEscape(value), "json": jsonEscape(value),
		"json2": jsonEscape(jsonEscape(value)), "base64": base64.StdEncoding.EncodeToString([]byte(value))}
	at, form := strings.Index(carrier, value), value
	if at < 0 {
		at, form = strings.Index(carrier, jsonEscape(value)), jsonEscape(value)
	}
	if at < 0 {
		panic("the carrier does not hold the value: " + carrier)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte(carrier))
	from, to := (at+2)/3*4, (at+len(form))/3*4
	n["base64-in-carrier"] = b64[from:to]
	if part != "" {
		n["part"] = part
	}
	for k, v := range n {
		if len(v) < 8 {
			delete(n, k)
		}
	}
	return n
}

func buildScaleCases(t *testing.T, secrets []scaleSecret) []*scaleCase {
	r := rand.New(rand.NewPCG(scaleSeed, 0x5ec2e75))
	var cases []*scaleCase
	seen := map[string]bool{}
	for e := range scaleEncodings {
		for p := range numPaths {
			for s, sec := range secrets {
				v, carrier, part := sec.gen(r)
				if seen[v] || part != "" && seen[part] {
					t.Fatalf("secret %d repeats a value", s)
				}
				seen[v], seen[part] = true, true
				c := &scaleCase{secret: s, enc: e, path: p, value: v, part: part, sent: scaleEncodings[e].enc(carrier),
					needles: makeNeedles(v, carrier, part)}
				text, isJSON := c.carried()
				var out string
				if isJSON {
					b, err := redact.JSON([]byte(text))
					if err != nil {
						t.Fatal(err)
					}
					out = string(b)
				} else {
					out = redact.String(text)
				}
				c.promised = !holdsNeedle(out, c)
				cases = append(cases, c)
			}
		}
	}
	return cases
}

// holdsNeedle reports whether text holds a form of the case's value.
func holdsNeedle(text string, c *scaleCase) bool {
	for form, nd := range c.needles {
		if form == "part" && strings.Contains(asciiFold(text), asciiFold(nd)) || strings.Contains(text, nd) {
			return true
		}
	}
	return false
}

func asciiFold(s string) string {
	b := []byte(s)
	foldInPlace(b)
	return string(b)
}

func foldInPlace(b []byte) {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
}

// needleIndex finds every needle in a text in one pass: each needle is
// keyed by eight (case-folded) bytes from its middle.
type needleIndex struct {
	byKey map[uint64][]needleRef
}

type needleRef struct {
	c      *scaleCase
	form   string
	folded string // the needle, case-folded
	off    int    // where the key starts in the needle
}

func newNeedleIndex(cases []*scaleCase) *needleIndex {
	ix := &needleIndex{byKey: map[uint64][]needleRef{}}
	for _, c := range cases {
		done := map[string]bool{}
		for _, form := range sortedKeys(c.needles) {
			nd := c.needles[form]
			if done[nd] {
				continue
			}
			done[nd] = true
			f := asciiFold(nd)
			off := len(f)/2 - 4
			k := binary.LittleEndian.Uint64([]byte(f[off : off+8]))
			ix.byKey[k] = append(ix.byKey[k], needleRef{c, form, f, off})
		}
	}
	return ix
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// A scaleHit is a needle found in a file.
type scaleHit struct {
	file string
	c    *scaleCase
	form string // which form of the value: plain, url, json, json2, base64, base64-in-carrier, part
	at   int
	near string // the bytes around it
}

// scan returns the needles in data: exact, and the random part in any case.
func (ix *needleIndex) scan(file string, data []byte) []scaleHit {
	folded := bytes.Clone(data)
	foldInPlace(folded)
	var hits []scaleHit
	for i := 0; i+8 <= len(folded); i++ {
		refs, ok := ix.byKey[binary.LittleEndian.Uint64(folded[i:])]
		if !ok {
			continue
		}
		for _, ref := range refs {
			start := i - ref.off
			end := start + len(ref.folded)
			if start < 0 || end > len(folded) || string(folded[start:end]) != ref.folded {
				continue
			}
			if ref.form != "part" && string(data[start:end]) != ref.c.needles[ref.form] {
				continue
			}
			hits = append(hits, scaleHit{file, ref.c, ref.form, start, string(data[max(start-100, 0):min(end+60, len(data))])})
		}
	}
	return hits
}

// reRunDir is a run's directory in an export.
var reRunDir = regexp.MustCompile(`runs/[0-9A-Z]{26}/`)

func TestSecretsAtScale(t *testing.T) {
	began := time.Now()
	secrets := scaleSecrets()
	cases := buildScaleCases(t, secrets)
	families := []string{}
	for _, s := range secrets {
		if len(families) == 0 || families[len(families)-1] != s.family {
			families = append(families, s.family)
		}
	}
	if len(secrets) < 200 || len(families) < 8 {
		t.Fatalf("%d secrets in %d families", len(secrets), len(families))
	}
	byKey := map[[3]int]*scaleCase{}
	for _, c := range cases {
		byKey[[3]int{c.secret, c.enc, c.path}] = c
	}
	at := func(s, e, p int) *scaleCase { return byKey[[3]int{s, e, p}] }
	doc := func(e, p int) string {
		var b strings.Builder
		for s := range secrets {
			b.WriteString(at(s, e, p).sent)
			b.WriteString("\n")
		}
		return b.String()
	}
	// Recall: every family's text is masked in every encoding (URL-encoded
	// and base64 runs are decoded and read again).
	for _, c := range cases {
		if out := redact.String(c.sent); holdsNeedle(out, c) {
			t.Errorf("not masked: %s, %s: %q", secrets[c.secret].family, scaleEncodings[c.enc].name, out)
		}
	}
	fam := map[string]int{}
	for i, f := range families {
		fam[f] = i
	}
	setup := time.Since(began)

	// One home, one workspace; the temporary, HOME and XDG directories
	// are the test's, so that whatever warden writes there is searched.
	scratch := t.TempDir()
	dir := func(name string) string {
		d := filepath.Join(scratch, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		d, _ = filepath.EvalSymlinks(d)
		return d
	}
	home, ws, exports, tmp, user := dir("home"), dir("ws"), dir("exports"), dir("tmp"), dir("user")
	t.Setenv("TMPDIR", tmp)
	t.Setenv("HOME", user)
	for _, x := range []string{"XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"} {
		t.Setenv(x, filepath.Join(user, strings.ToLower(x)))
	}
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("WARDEN_MODEL", "scripted")
	policy := filepath.Join(scratch, "policy.yaml")
	writeFile(t, policy, `version: 1
grants: ["fs.read:**", "fs.write:**", "memory.read:*", "memory.write:*", "exec:cat", "net:127.0.0.1"]
rules:
  - { tool: shell, action: allow }
`)
	// The workflow echoes each encoding's document in a step of its own
	// (a shell command holds at most 64 KiB).
	wf := "version: 1\nname: echo-params\nparams:\n"
	for _, en := range scaleEncodings {
		wf += "  doc_" + en.name + ": {type: string}\n"
	}
	wf += "grants: [\"fs.read:**\", \"exec:cat\"]\nsteps:\n"
	for _, en := range scaleEncodings {
		wf += "  - id: echo_" + en.name + "\n    tool: shell\n    args: {command: \"cat <<'WARDEN_EOF'\\n${{ params.doc_" + en.name + " }}\\nWARDEN_EOF\\n\"}\n"
	}
	writeFile(t, filepath.Join(ws, "echo.yaml"), wf)
	// Files the test writes itself (read by tools) and the files warden
	// writes because a call asks it to (fs_write's content): the secrets
	// must stay in them.
	own := map[string]bool{}
	spent := map[string]time.Duration{}
	warden := func(args ...string) (int, string, string) {
		start := time.Now()
		defer func() {
			k := args[0]
			if k == "call" || k == "runs" || k == "workflow" || k == "audit" {
				k += " " + args[1]
			}
			spent[k] += time.Since(start)
		}()
		return runWS(t, home, ws, append([]string{"--policy", policy}, args...)...)
	}
	type envelope struct {
		Success bool   `json:"success"`
		Output  string `json:"output"`
		Error   *struct {
			Code string `json:"code"`
		} `json:"error"`
		Data json.RawMessage `json:"data"`
	}
	call := func(tool string, args any, wantCode string) envelope {
		t.Helper()
		b, _ := json.Marshal(args)
		_, out, errs := warden("call", tool, "--args", string(b))
		var env envelope
		if err := json.Unmarshal([]byte(out), &env); err != nil {
			t.Fatalf("%s: %v\n%.2000s\n%.2000s", tool, err, out, errs)
		}
		code := ""
		if env.Error != nil {
			code = env.Error.Code
		}
		if code != wantCode {
			t.Fatalf("%s: error %q, want %q\n%.2000s", tool, code, wantCode, out)
		}
		return env
	}
	masks := func(what, text string, want int) {
		t.Helper()
		if n := len(reMaskText.FindAllString(text, -1)); n < want {
			t.Errorf("%s: %d masks, want %d or more", what, n, want)
		}
	}
	// Every path is taken once with the cases of all four encodings (each
	// case has a value of its own, so nothing is lost by mixing them),
	// but where a tool's limit asks for more calls.
	all := func(p int) string {
		var b strings.Builder
		for e := range scaleEncodings {
			b.WriteString(doc(e, p))
		}
		return b.String()
	}
	n := len(secrets) * len(scaleEncodings) // the cases each path carries
	// Tool arguments: fs_write's content, then fs_read of the file.
	own[filepath.Join(ws, "written.txt")] = true
	call("fs_write", map[string]any{"path": "written.txt", "content": all(pathArgs)}, "")
	if got, _ := os.ReadFile(filepath.Join(ws, "written.txt")); string(got) != all(pathArgs) {
		t.Fatalf("fs_write wrote %d bytes, not the content asked", len(got))
	}
	masks("fs_read", call("fs_read", map[string]any{"path": "written.txt"}, "").Output, len(secrets))
	// Tool outputs: read_files and a shell's cat of files the test wrote.
	for _, f := range []struct {
		path int
		file string
	}{{pathReadFiles, "read.txt"}, {pathShellCat, "cat.txt"}} {
		own[filepath.Join(ws, f.file)] = true
		writeFile(t, filepath.Join(ws, f.file), all(f.path))
	}
	masks("read_files", call("read_files", map[string]any{"file_paths": []string{"read.txt"}}, "").Output, len(secrets))
	masks("shell cat", call("shell", map[string]any{"command": "cat cat.txt"}, "").Output, len(secrets))
	// Memory: stored, then searched. Memory keeps the plain mask,
	// [REDACTED], never kept in a vault.
	call("write_memory", map[string]any{"namespace": "scale", "key": "doc", "value": all(pathMemory)}, "")
	found := string(call("query_memory", map[string]any{"namespace": "scale", "query": "token password secret key authorization"}, "").Data)
	if m := strings.Count(found, redact.Mask); m < len(secrets) {
		t.Errorf("query_memory: %d masks, want %d or more", m, len(secrets))
	}
	// Model messages: the task, the model's answer and its tool call's
	// arguments; and errors the run records: read_files of paths that do
	// not exist (each error quoting its path, also cut short in the middle
	// of the secret) and of paths outside the grants (CAPABILITY_DENIED
	// naming them).
	// (One model turn runs at most 16 tool calls: a turn for each.)
	toolArgs, _ := json.Marshal(map[string]string{"text": all(pathModelArgs)})
	steps := []llmtest.Step{{Content: "Let me look at it.", ToolCalls: []llmtest.ToolCall{{Name: "analyze", Arguments: string(toolArgs)}}}}
	for _, p := range []int{pathErrMissing, pathErrDenied, pathErrCut} {
		var calls []llmtest.ToolCall
		var paths []string
		for e := range scaleEncodings {
			for s := range secrets {
				c := at(s, e, p)
				paths = append(paths, map[int]string{pathErrMissing: "missing/" + c.sent, pathErrDenied: "/outside-scale/" + c.sent, pathErrCut: c.cutPath()}[p])
			}
		}
		for len(paths) > 0 {
			k := min(len(paths), 100)
			b, _ := json.Marshal(map[string]any{"file_paths": paths[:k]})
			calls = append(calls, llmtest.ToolCall{Name: "read_files", Arguments: string(b)})
			paths = paths[k:]
		}
		steps = append(steps, llmtest.Step{Content: "Reading.", ToolCalls: calls})
	}
	srv := llmtest.New(t, append(steps, llmtest.Step{Content: all(pathModelReply)})...)
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	code, out, errs := warden("run", "--tools", "analyze,read_files", all(pathModelTask))
	if code != 0 || !strings.Contains(errs, "succeeded") || srv.Remaining() != 0 {
		t.Fatalf("run: exit %d\n%.2000s\n%.2000s", code, out, errs)
	}
	if denied := strings.Count(errs, "✗ CAPABILITY_DENIED"); denied != (n+99)/100 {
		t.Errorf("%d read_files calls denied, want %d:\n%s", denied, (n+99)/100, errs)
	}
	// A workflow's params, echoed by its steps.
	args := []string{"workflow", "run", filepath.Join(ws, "echo.yaml")}
	for e, en := range scaleEncodings {
		args = append(args, "--param", "doc_"+en.name+"="+doc(e, pathWorkflow))
	}
	if code, out, errs := warden(args...); code != 0 {
		t.Fatalf("workflow: exit %d\n%.2000s\n%.2000s", code, out, errs)
	}
	// Errors of warden call: an http call to a refused host with the
	// secrets in its query (at most 256 parameters a call), a call refused
	// for its arguments (their first 4096 bytes, redacted, are kept).
	for e := range scaleEncodings {
		params := map[string]string{}
		for s := range secrets {
			params[at(s, e, pathErrHTTP).paramName()] = at(s, e, pathErrHTTP).sent
		}
		call("http", map[string]any{"method": "GET", "url": "http://127.0.0.1:1/hook", "params": params}, "NETWORK_ERROR")
		call("write_memory", map[string]any{"namespace": "scale", "value": doc(e, pathErrInvalid)}, "INVALID_INPUT")
	}
	// What leaves the home: the audit log and every run, exported.
	if code, _, errs := warden("audit", "export", "--out", filepath.Join(exports, "audit.jsonl")); code != 0 {
		t.Fatalf("audit export: %s", errs)
	}
	_, out, _ = warden("runs", "ls", "--json")
	var runs []struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal([]byte(out), &runs); err != nil {
		t.Fatalf("runs ls: %v\n%s", err, out)
	}
	kinds := map[string]int{}
	for _, r := range runs {
		kinds[r.Kind]++
		if code, _, errs := warden("runs", "export", r.ID, "--dir", filepath.Join(exports, "runs")); code != 0 {
			t.Fatalf("runs export %s: %s", r.ID, errs)
		}
	}
	if kinds["agent"] != 1 || kinds["workflow"] != 1 {
		t.Fatalf("runs recorded: %v", kinds)
	}
	if code, _, errs := warden("audit", "verify"); code != 0 {
		t.Fatalf("audit verify: %s", errs)
	}
	ran := time.Since(began) - setup

	// Every byte on disk.
	ix := newNeedleIndex(cases)
	var hits []scaleHit
	files, bytesRead := 0, 0
	for _, root := range []string{home, ws, exports, tmp, user} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || own[p] {
				return err
			}
			if !d.Type().IsRegular() {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files++
			bytesRead += len(data)
			rel, _ := filepath.Rel(scratch, p)
			hits = append(hits, ix.scan(rel, data)...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The files the test and fs_write wrote do hold every case sent to
	// them: the search finds what is there.
	for p := range own {
		data, _ := os.ReadFile(p)
		found := map[*scaleCase]bool{}
		for _, h := range ix.scan(p, data) {
			found[h.c] = true
		}
		if len(found) != n {
			t.Errorf("the search finds %d of the %d cases in %s", len(found), n, p)
		}
	}
	scanned := time.Since(began) - setup - ran

	// Leaks first: a promised case on disk is a hole.
	type cell struct{ promised, cases, onDisk, hits int }
	table := map[[2]int]*cell{}
	for i := range families {
		for e := range scaleEncodings {
			table[[2]int{i, e}] = &cell{}
		}
	}
	for _, c := range cases {
		cl := table[[2]int{fam[secrets[c.secret].family], c.enc}]
		cl.cases++
		if c.promised {
			cl.promised++
		}
	}
	leaks, gapHits := 0, 0
	onDisk := map[*scaleCase]bool{}
	gapFiles := map[string]int{}       // hits of cases not masked, by file
	gapPaths := map[int][]*scaleCase{} // cases not masked found on disk, by path (with repeats)
	leakedAt := map[string]int{}       // hits of promised cases by file, encoding and path
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].file != hits[j].file {
			return hits[i].file < hits[j].file
		}
		return hits[i].at < hits[j].at
	})
	for _, h := range hits {
		c := h.c
		cl := table[[2]int{fam[secrets[c.secret].family], c.enc}]
		cl.hits++
		if !onDisk[c] {
			onDisk[c] = true
			cl.onDisk++
		}
		// A form the case was not sent in (its plain text, when it was
		// sent as base64 or URL-encoded): something decoded it and kept it.
		decoded := (h.form == "plain" || h.form == "part") && !strings.Contains(asciiFold(c.sent), asciiFold(c.needles[h.form]))
		if decoded || c.promised {
			leaks++
			how := ""
			if decoded {
				how = "decoded, "
			}
			where := fmt.Sprintf("%s: sent %s through %s", h.file, scaleEncodings[c.enc].name, scalePathNames[c.path])
			if leakedAt[where]++; leakedAt[where] <= 3 {
				t.Errorf("LEAK: %s: secret %d (%s), %sas %s at byte %d: %q in %q",
					where, c.secret, secrets[c.secret].family, how, h.form, h.at, c.needles[h.form], h.near)
			}
			continue
		}
		gapHits++
		gapFiles[reRunDir.ReplaceAllString(h.file, "runs/RUN/")]++
		gapPaths[c.path] = append(gapPaths[c.path], c)
	}
	for _, where := range sortedKeys(leakedAt) {
		t.Errorf("LEAK: %s: %d hits", where, leakedAt[where])
	}
	total := len(cases)
	t.Logf("%d secrets × %d encodings × %d paths = %d cases; hits on disk: %d", len(secrets), len(scaleEncodings), numPaths, total, leaks)
	heldOnDisk := "yes"
	if leaks > 0 {
		heldOnDisk = "NO"
	}
	t.Logf("security-report: secrets at scale | %d secrets × %d encodings × %d paths = %d cases; hits on disk of what the detector masks: %d | %s",
		len(secrets), len(scaleEncodings), numPaths, total, leaks, heldOnDisk)
	t.Logf("searched %d files, %d bytes (home, workspace, exports, TMPDIR, HOME), %d runs (%v); setup %v, warden %v, search %v",
		files, bytesRead, len(runs), kinds, setup.Round(time.Millisecond), ran.Round(time.Millisecond), scanned.Round(time.Millisecond))
	t.Log("masked, of the cases, per family and encoding (the detector's verdict on the text as its path carries it), and the cases found on disk:")
	for i, f := range families {
		line := fmt.Sprintf("  %-21s", f)
		for e := range scaleEncodings {
			cl := table[[2]int{i, e}]
			line += fmt.Sprintf(" %s %3d/%d", scaleEncodings[e].name, cl.promised, cl.cases)
			if cl.onDisk > 0 {
				line += fmt.Sprintf(" (%d on disk)", cl.onDisk)
			}
		}
		t.Log(line)
	}
	for e := range scaleEncodings {
		p, n, d := 0, 0, 0
		for i := range families {
			cl := table[[2]int{i, e}]
			p, n, d = p+cl.promised, n+cl.cases, d+cl.onDisk
		}
		t.Logf("  %-6s masked %4d/%d (%.1f%%); not masked %d, of which %d found on disk", scaleEncodings[e].name, p, n, 100*float64(p)/float64(n), n-p, d)
	}
	for p := range numPaths {
		distinct := map[*scaleCase]bool{}
		for _, c := range gapPaths[p] {
			distinct[c] = true
		}
		if len(distinct) > 0 {
			t.Logf("  the gap through %s: %d cases on disk", scalePathNames[p], len(distinct))
		}
	}
	var gf []string
	for _, f := range sortedKeys(gapFiles) {
		gf = append(gf, fmt.Sprintf("%s %d", f, gapFiles[f]))
	}
	t.Logf("  the gap's %d hits by file: %s", gapHits, strings.Join(gf, ", "))
	var times []string
	for _, k := range sortedKeys(spent) {
		times = append(times, fmt.Sprintf("%s %v", k, spent[k].Round(time.Millisecond)))
	}
	t.Logf("  warden's time by command: %s", strings.Join(times, ", "))
	t.Log("false positives on a clean corpus: 0 masks not explained (runtime/redact TestPrecisionCorpus*: this repository's " +
		"non-test Go files, a tenth of Go's standard library and all of crypto/tls, Python's standard library; figures in docs/redaction.md)")
}
