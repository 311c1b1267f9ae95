// Package redact removes secrets from text and JSON before anything is
// written: the database, logs, artifacts, approval prompts.
//
// Every secret found is replaced by [Mask], "[REDACTED]", whatever its kind:
// one replacement keeps redaction idempotent (String(String(s)) ==
// String(s)) and keeps the mask from becoming part of a new match. Where a
// secret has a visible label, the label stays: "password=[REDACTED]",
// "Authorization: Bearer [REDACTED]", "postgres://app:[REDACTED]@db/prod",
// "https://hooks.slack.com/services/[REDACTED]".
//
// # What is found in text
//
//   - PEM private key blocks (RSA, EC, DSA, OPENSSH, ENCRYPTED, PKCS#8, PGP
//     PRIVATE KEY BLOCK), whole, from BEGIN to END — or, when the END line is
//     missing (truncated output), to the end of the base64 body
//   - passwords in URLs: scheme://user:PASSWORD@host (user and host kept)
//   - OpenAI keys (sk-…, sk-proj-…, sk-svcacct-…, sk-admin-…), Anthropic keys
//     (sk-ant-…), AWS access key ids (AKIA…, ASIA…), GitHub tokens (ghp_,
//     gho_, ghu_, ghs_, ghr_, github_pat_), GitLab tokens (glpat-, gldt-,
//     glrt-, glcbt-, glptt-, glft-, glimt-, glagent-, glsoat-, glffct-,
//     gloas-, glwt-), Slack tokens with a digit in them (xoxb-, xoxp-,
//     xoxa-, xoxr-, xoxs-, xoxe-, xapp-) and webhook paths
//     (hooks.slack.com/services/…), JWTs (eyJ….….…), Stripe keys (sk_live_,
//     rk_live_, sk_test_), Google API keys (AIza…), Hugging Face (hf_…) and
//     npm (npm_…) tokens
//   - HTTP credentials: the value of Authorization and Proxy-Authorization
//     (after its scheme: Bearer, Basic, token, …) and of Cookie and
//     Set-Cookie headers; "Bearer <token>" anywhere when the token has a
//     digit; "Basic <base64>" anywhere when it decodes to user:password;
//     curl -u user:PASSWORD
//   - KEY=value, key: value, "key": "value" and 'key': 'value' pairs (also
//     with :=, == and spaces around the separator) whose key ends in
//     password, passwd, passphrase, pwd, secret, token, api_key / apikey /
//     api-key, access_key, secret_key, private_key or credential(s) — with
//     any prefix (DB_PASSWORD, GITHUB_TOKEN, aws_secret_access_key,
//     X-Api-Key, client_secret). The key is kept and the value masked: a
//     quoted value up to its closing quote; an unquoted value after a quoted
//     key up to , } or ] (JSON-ish text); after = an unquoted value up to
//     white space, &, ;, a quote, a backslash, < > or {; after : an unquoted
//     value to the end of the line (YAML, headers, prose). Left alone: keys
//     that merely contain a keyword (max_tokens, tokenizer, password_hash);
//     the shell's PWD=/path and OLDPWD=/path; KEY= value (an empty value to
//     the shell); and, so that source code stays readable, values that are
//     a call or an index (os.Getenv(…), os.environ[…], get_password()) or a
//     type or empty literal (password: string, token: null).
//
// Ordinary text is left alone: words such as risk-management and task-force,
// git SHAs, UUIDs and base64 that is not one of the shapes above.
//
// A [Redactor] also masks literal values (the secrets in the environment),
// every occurrence, before and after the patterns run, so that no literal
// survives, not even re-formed across a mask.
//
// Redaction is linear in the input's size, whatever the input: each
// pattern is located by its literal anchor (sk-, ghp_, eyJ, password, …)
// and checked with an RE2 regular expression anchored there, and runs that
// a failed check has read are not read again.
package redact

import (
	"sort"
	"strings"
)

// Mask replaces every secret.
const Mask = "[REDACTED]"

// minLiteral is the shortest literal a Redactor masks; shorter values
// would mask ordinary words.
const minLiteral = 8

// maxLiteralPasses bounds the passes that remove literals re-formed across
// a mask (which only a literal that begins or ends like the mask can do).
const maxLiteralPasses = 8

// Redactor redacts the built-in patterns and a set of literal secrets. A nil
// *Redactor redacts the patterns only. It is safe for concurrent use.
type Redactor struct {
	literals []string // distinct, longest first
}

// New returns a Redactor that also masks every occurrence of each literal
// (for example the value of OPENAI_API_KEY). Literals shorter than 8 bytes
// are ignored, as are those that are part of the mask itself
// ("REDACTED]"), which could never be removed.
func New(literals ...string) *Redactor {
	r := &Redactor{}
	seen := map[string]bool{}
	for _, l := range literals {
		if len(l) < minLiteral || seen[l] || strings.Contains(Mask, l) {
			continue
		}
		seen[l] = true
		r.literals = append(r.literals, l)
	}
	sort.SliceStable(r.literals, func(i, j int) bool { return len(r.literals[i]) > len(r.literals[j]) })
	return r
}

var plain = &Redactor{}

// String redacts every secret pattern in s.
func String(s string) string { return plain.String(s) }

// Bytes redacts every secret pattern in b; the result is a new slice.
func Bytes(b []byte) []byte { return plain.Bytes(b) }

// JSON redacts a JSON document; see (*Redactor).JSON.
func JSON(raw []byte) ([]byte, error) { return plain.JSON(raw) }

// Contains reports whether String(s) would change s.
func Contains(s string) bool { return String(s) != s }

// String redacts the literals and every secret pattern in s.
func (r *Redactor) String(s string) string {
	if r == nil {
		r = plain
	}
	s = r.maskLiterals(s)
	s = redactPatterns(s)
	return r.maskLiterals(s)
}

// Bytes is String for byte slices; the result is a new slice (nil for nil).
func (r *Redactor) Bytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return []byte(r.String(string(b)))
}

// Contains reports whether r.String(s) would change s.
func (r *Redactor) Contains(s string) bool { return r.String(s) != s }

// maskLiterals replaces every byte that is part of an occurrence of a
// literal with the mask, merging overlapping and adjacent occurrences into
// one mask. A literal that begins or ends like the mask can re-form across
// it ("D]secret" after "[REDACTE"), so it repeats until none is left; each
// repeat shortens the text. Past maxLiteralPasses the whole text becomes
// the mask: nothing leaks, and the result is still a fixed point.
func (r *Redactor) maskLiterals(s string) string {
	if len(r.literals) == 0 {
		return s
	}
	for range maxLiteralPasses {
		spans := r.literalSpans(s)
		if len(spans) == 0 {
			return s
		}
		s = maskSpans(s, spans)
	}
	if len(r.literalSpans(s)) == 0 {
		return s
	}
	return Mask
}

// literalSpans returns the merged [start, end) spans of all occurrences
// (overlapping ones included) of every literal in s. A span that overlaps
// a mask already in s takes in the whole mask, so that a literal re-formed
// across a mask leaves one mask, not a torn one.
func (r *Redactor) literalSpans(s string) [][2]int {
	var spans [][2]int
	for _, l := range r.literals {
		spans = appendOccurrences(spans, s, l)
	}
	if len(spans) == 0 {
		return nil
	}
	spans = mergeSpans(spans)
	masks := appendOccurrences(nil, s, Mask) // in order, never overlapping
	j := 0
	for i := range spans {
		for j < len(masks) && masks[j][1] <= spans[i][0] {
			j++
		}
		for k := j; k < len(masks) && masks[k][0] < spans[i][1]; k++ {
			spans[i][0] = min(spans[i][0], masks[k][0])
			spans[i][1] = max(spans[i][1], masks[k][1])
		}
	}
	return mergeSpans(spans)
}

// appendOccurrences appends the spans of every occurrence of sub in s,
// overlapping ones included.
func appendOccurrences(spans [][2]int, s, sub string) [][2]int {
	for i := 0; i+len(sub) <= len(s); {
		j := strings.Index(s[i:], sub)
		if j < 0 {
			break
		}
		spans = append(spans, [2]int{i + j, i + j + len(sub)})
		i += j + 1
	}
	return spans
}
