package redact

import (
	"encoding/base64"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// A rule finds one kind of secret. Matches are found from anchors — the
// literal text every match starts with — located with strings.Index, and a
// regular expression anchored at each candidate (RE2: linear in what it
// reads). Candidates inside a span already masked are skipped, so the
// whole pass reads each byte a bounded number of times: redaction is
// linear in the size of the input, whatever the input.
type rule struct {
	name string
	// anchors: literal text a match starts with. With fold, they are lower
	// case and searched for in the ASCII-lower-cased text.
	anchors []string
	fold    bool
	// word: the byte before a match must not be a word byte [A-Za-z0-9_].
	word bool
	re   *regexp.Regexp // starts with ^: matched at the candidate
	// span returns the part of a match (submatch indices into s) to mask;
	// ok=false leaves it alone. nil masks the whole match.
	span func(s string, m []int) (start, end int, ok bool)
	// skipRun, when set, is the class of the bytes a failed or rejected
	// candidate's match attempt runs over: later candidates inside that run
	// would fail the same way, so they are skipped (this keeps runs like
	// eyJ-eyJ-eyJ-… linear).
	skipRun *byteSet
	// find replaces the anchor and regular expression machinery for the
	// rules that need more (private keys, key-value pairs). It returns the
	// spans to mask, in order, not overlapping.
	find func(s, lower string) [][2]int
}

// byteSet is a set of ASCII bytes.
type byteSet [256]bool

func newByteSet(ranges ...string) *byteSet {
	var set byteSet
	for _, r := range ranges {
		if len(r) == 3 && r[1] == '-' {
			for c := int(r[0]); c <= int(r[2]); c++ {
				set[c] = true
			}
			continue
		}
		for i := 0; i < len(r); i++ {
			set[r[i]] = true
		}
	}
	return &set
}

var (
	wordBytes  = newByteSet("a-z", "A-Z", "0-9", "_")
	tokenBytes = newByteSet("a-z", "A-Z", "0-9", "_-")
	keyBytes   = newByteSet("a-z", "A-Z", "0-9", "_.-")
)

// group masks submatch n.
func group(n int) func(string, []int) (int, int, bool) {
	return func(_ string, m []int) (int, int, bool) {
		return m[2*n], m[2*n+1], m[2*n] >= 0 && m[2*n] < m[2*n+1]
	}
}

// withDigit masks submatch n when it holds a digit: random tokens have
// digits, prose does not.
func withDigit(n int) func(string, []int) (int, int, bool) {
	return func(s string, m []int) (int, int, bool) {
		return m[2*n], m[2*n+1], strings.ContainsAny(s[m[2*n]:m[2*n+1]], "0123456789")
	}
}

var rules = []rule{
	{name: "private-key", find: findPrivateKeys},
	{
		name:    "url-password",
		anchors: []string{"://"},
		re:      regexp.MustCompile(`^://[^\s:/?#@"'<>\[\]]*:([^\s/?#"'<>]+)@`),
		span:    group(1),
	},
	{
		name:    "anthropic-key",
		anchors: []string{"sk-ant-"},
		word:    true,
		re:      regexp.MustCompile(`^sk-ant-[A-Za-z0-9_-]{20,}`),
	},
	{
		name:    "openai-key",
		anchors: []string{"sk-"},
		word:    true,
		re:      regexp.MustCompile(`^sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}`),
	},
	{
		name:    "openai-legacy-key",
		anchors: []string{"sk-"},
		word:    true,
		re:      regexp.MustCompile(`^sk-[A-Za-z0-9]{20,}`),
		span:    withDigit(0),
	},
	{
		name:    "aws-access-key-id",
		anchors: []string{"AKIA", "ASIA"},
		word:    true,
		re:      regexp.MustCompile(`^(?:AKIA|ASIA)[A-Z0-9]{16}\b`),
	},
	{
		name:    "github-token",
		anchors: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		word:    true,
		re:      regexp.MustCompile(`^(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})`),
	},
	{
		name:    "gitlab-token",
		anchors: []string{"gl"},
		word:    true,
		re:      regexp.MustCompile(`^gl(?:pat|dt|rt|rtr|cbt|ptt|ft|imt|agent|soat|ffct|oas|wt)-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+)*`),
	},
	{
		name:    "slack-token",
		anchors: []string{"xox", "xapp-"},
		word:    true,
		re:      regexp.MustCompile(`^(?:(?:xox[abprs]|xoxe(?:\.xox[bp])?)-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,})`),
		span:    withDigit(0),
		skipRun: newByteSet("a-z", "A-Z", "0-9", "-"),
	},
	{
		name:    "slack-webhook",
		anchors: []string{"hooks.slack.com/"},
		re:      regexp.MustCompile(`^hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/-]+)`),
		span:    group(1),
	},
	{
		name:    "jwt",
		anchors: []string{"eyJ"},
		word:    true,
		re:      regexp.MustCompile(`^eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*`),
		skipRun: tokenBytes,
	},
	{
		name:    "stripe-key",
		anchors: []string{"sk_live_", "rk_live_", "sk_test_", "rk_test_"},
		word:    true,
		re:      regexp.MustCompile(`^[rs]k_(?:live|test)_[A-Za-z0-9]{16,}`),
	},
	{
		name:    "google-api-key",
		anchors: []string{"AIza"},
		word:    true,
		re:      regexp.MustCompile(`^AIza[0-9A-Za-z_-]{35}`),
	},
	{
		name:    "huggingface-token",
		anchors: []string{"hf_"},
		word:    true,
		re:      regexp.MustCompile(`^hf_[A-Za-z0-9]{30,}\b`),
	},
	{
		name:    "npm-token",
		anchors: []string{"npm_"},
		word:    true,
		re:      regexp.MustCompile(`^npm_[A-Za-z0-9]{36}\b`),
	},
	{
		// Authorization: Bearer x, "authorization": "Basic x", … — the
		// scheme stays, the rest of the value (to the end of the line or
		// the closing quote) goes.
		name:    "authorization-header",
		anchors: []string{"authorization"},
		fold:    true,
		word:    true,
		re: regexp.MustCompile(`^(?i)authorization\\?["']?[ \t]*[:=][ \t]*\\?["']?` +
			`(?:(?:bearer|basic|token|digest|negotiate|ntlm|aws4-hmac-sha256|apikey|sso-key)[ \t]+)?` +
			`([^\s"'\\](?:[^\r\n"'\\]*[^\s"'\\])?)`),
		span: group(1),
	},
	{
		name:    "cookie-header",
		anchors: []string{"cookie"},
		fold:    true,
		word:    true,
		re:      regexp.MustCompile(`^(?i)cookie\\?["']?[ \t]*:[ \t]*\\?["']?([^\s"'\\](?:[^\r\n"'\\]*[^\s"'\\])?)`),
		span:    group(1),
	},
	{
		name:    "bearer-token",
		anchors: []string{"bearer"},
		fold:    true,
		word:    true,
		re:      regexp.MustCompile(`^(?i)bearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)`),
		span:    withDigit(1),
	},
	{
		name:    "basic-credentials",
		anchors: []string{"basic"},
		fold:    true,
		word:    true,
		re:      regexp.MustCompile(`^(?i)basic[ \t]+([A-Za-z0-9+/]{6,}={0,2})`),
		span: func(s string, m []int) (int, int, bool) {
			return m[2], m[3], isBasicCredentials(s[m[2]:m[3]])
		},
	},
	{
		// curl -u user:password, curl --user=user:password
		name:    "curl-user",
		anchors: []string{"-u", "--user"},
		re:      regexp.MustCompile(`^(?:-u|--user)(?:[ \t]+|=)['"]?[^\s:'"]+:([^\s'"]+)`),
		span: func(s string, m []int) (int, int, bool) {
			if m[0] > 0 && !isSpace(s[m[0]-1]) {
				return 0, 0, false // not an option: sort-u, x--user
			}
			return m[2], m[3], true
		},
	},
	{name: "key-value", find: findKeyValues},
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// redactPatterns masks what every rule finds. The rules all read the same
// text; their spans are merged (overlapping or touching spans become one
// mask) and masked in one pass.
func redactPatterns(s string) string {
	if s == "" {
		return s
	}
	lower := asciiLower(s)
	var spans [][2]int
	for i := range rules {
		if rules[i].find != nil {
			spans = append(spans, rules[i].find(s, lower)...)
		} else {
			spans = append(spans, rules[i].spans(s, lower)...)
		}
	}
	if len(spans) == 0 {
		return s
	}
	return maskSpans(s, mergeSpans(spans))
}

// mergeSpans sorts spans and merges those that overlap or touch.
func mergeSpans(spans [][2]int) [][2]int {
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		top := &merged[len(merged)-1]
		if sp[0] <= top[1] {
			top[1] = max(top[1], sp[1])
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

// maskSpans replaces each span (sorted, not overlapping) by Mask.
func maskSpans(s string, spans [][2]int) string {
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp[0]])
		b.WriteString(Mask)
		last = sp[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// asciiLower lower-cases ASCII letters only, so byte offsets stay valid.
func asciiLower(s string) string {
	i := 0
	for i < len(s) && !('A' <= s[i] && s[i] <= 'Z') {
		i++
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if 'A' <= b[i] && b[i] <= 'Z' {
			b[i] += 'a' - 'A'
		}
	}
	return string(b)
}

// anchorIter yields, in order, the positions where any of several anchors
// occur in text, remembering each anchor's next occurrence so that the
// text is searched once per anchor.
type anchorIter struct {
	text    string
	anchors []string
	next    []int // next occurrence of each anchor at or after the last query; -1 = none left
}

func newAnchorIter(text string, anchors []string) *anchorIter {
	it := &anchorIter{text: text, anchors: anchors, next: make([]int, len(anchors))}
	for i := range it.next {
		it.next[i] = -2 // not searched yet
	}
	return it
}

// from returns the first anchor position >= pos, or -1.
func (it *anchorIter) from(pos int) int {
	best := -1
	for i, a := range it.anchors {
		n := it.next[i]
		if n == -1 {
			continue
		}
		if n < pos {
			if pos > len(it.text) {
				it.next[i] = -1
				continue
			}
			j := strings.Index(it.text[pos:], a)
			if j < 0 {
				it.next[i] = -1
				continue
			}
			n = pos + j
			it.next[i] = n
		}
		if best < 0 || n < best {
			best = n
		}
	}
	return best
}

// spans runs an anchored rule over s.
func (r *rule) spans(s, lower string) [][2]int {
	text := s
	if r.fold {
		text = lower
	}
	var out [][2]int
	last := 0 // end of the last masked span
	skip := 0 // candidates before skip are known to fail
	it := newAnchorIter(text, r.anchors)
	for p := it.from(0); p >= 0; p = it.from(max(p+1, last, skip)) {
		if r.word && p > 0 && wordBytes[s[p-1]] {
			continue
		}
		m := r.re.FindStringSubmatchIndex(s[p:])
		if m == nil {
			if r.skipRun != nil {
				skip = runEnd(s, p, r.skipRun)
			}
			continue
		}
		for i := range m {
			if m[i] >= 0 {
				m[i] += p
			}
		}
		start, end, ok := m[0], m[1], true
		if r.span != nil {
			start, end, ok = r.span(s, m)
		}
		if !ok && r.skipRun != nil {
			skip = runEnd(s, p, r.skipRun)
		}
		if !ok || start < last || s[start:end] == Mask {
			continue
		}
		out = append(out, [2]int{start, end})
		last = end
	}
	return out
}

// runEnd returns the end of the run of bytes in set that starts at p.
func runEnd(s string, p int, set *byteSet) int {
	for p < len(s) && set[s[p]] {
		p++
	}
	return p
}

var (
	pemBegin = regexp.MustCompile(`^-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`)
	pemEnd   = regexp.MustCompile(`-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`)
	pemBody  = newByteSet("a-z", "A-Z", "0-9", "+/=:,.-\\", " \t\r\n")
)

// findPrivateKeys masks PEM private key blocks from BEGIN to END, or, with
// the END line missing (truncated output), to the end of the base64 body.
func findPrivateKeys(s, _ string) [][2]int {
	var out [][2]int
	endAt := -2 // cached start of the next END line after the last search; -1: none left
	var endLen int
	for pos := 0; pos < len(s); {
		i := strings.Index(s[pos:], "-----BEGIN")
		if i < 0 {
			break
		}
		p := pos + i
		h := pemBegin.FindStringIndex(s[p:])
		if h == nil {
			pos = p + 1
			continue
		}
		body := p + h[1]
		if endAt != -1 && endAt < body {
			if e := pemEnd.FindStringIndex(s[body:]); e != nil {
				endAt, endLen = body+e[0], e[1]-e[0]
			} else {
				endAt = -1
			}
		}
		end := runEnd(s, body, pemBody)
		if endAt >= 0 {
			end = endAt + endLen
		}
		out = append(out, [2]int{p, end})
		pos = end
	}
	return out
}

// keyValueKeywords end the keys whose values are masked; keyValueAnchors
// find them (every keyword contains one).
var (
	keyValueKeywords = []string{"passwd", "password", "passphrase", "pwd", "secret", "token",
		"apikey", "api_key", "api-key", "accesskey", "access_key", "access-key", "secretkey", "secret_key",
		"secret-key", "privatekey", "private_key", "private-key", "credential", "credentials"}
	keyValueAnchors = []string{"pass", "pwd", "secret", "token", "key", "credential"}

	// keyValueRest follows the key: 1 a quote closing the key, 2 the
	// separator, 3-5 quoted values, 6 a bare value.
	keyValueRest = regexp.MustCompile(`^(\\?["']?)([ \t]*(?::=|==?|:)[ \t]*)` +
		`(?:"((?:[^"\\\r\n]|\\.)*)"|\\"([^"\\\r\n]*)\\"|'([^'\r\n]*)'|([^\s"'\\&;<>{]+))`)
)

// findKeyValues masks the values of KEY=value, key: value, "key": "value"
// and 'key': 'value' pairs whose key ends in a keyword.
func findKeyValues(s, lower string) [][2]int {
	var out [][2]int
	last, lastWordEnd := 0, -1
	it := newAnchorIter(lower, keyValueAnchors)
	for p := it.from(0); p >= 0; p = it.from(max(p+1, last)) {
		e := runEnd(lower, p, wordBytes)
		if e == lastWordEnd {
			continue
		}
		lastWordEnd = e
		if !endsWithKeyword(lower[:e]) {
			continue
		}
		m := keyValueRest.FindStringSubmatchIndex(s[e:])
		if m == nil {
			continue
		}
		for i := range m {
			if m[i] >= 0 {
				m[i] += e
			}
		}
		keyStart := e
		for keyStart > 0 && keyBytes[s[keyStart-1]] {
			keyStart--
		}
		for !wordBytes[s[keyStart]] {
			keyStart++
		}
		start, end, ok := keyValueSpan(s, s[keyStart:e], m)
		if !ok || start < last || s[start:end] == Mask {
			continue
		}
		out = append(out, [2]int{start, end})
		last = end
	}
	return out
}

func endsWithKeyword(s string) bool {
	for _, k := range keyValueKeywords {
		if strings.HasSuffix(s, k) {
			return true
		}
	}
	return false
}

// keyValueSpan picks the value to mask after key; m holds keyValueRest's
// submatches (indices into s).
func keyValueSpan(s, key string, m []int) (int, int, bool) {
	for g := 3; g <= 5; g++ {
		if m[2*g] >= 0 {
			return m[2*g], m[2*g+1], m[2*g] < m[2*g+1]
		}
	}
	quotedKey, sep := m[2] < m[3], s[m[4]:m[5]]
	start, end := m[12], m[13]
	if quotedKey {
		// "key": 123, — JSON-ish: the value ends where the member does.
		i := indexOutsideMask(s[start:end], ",}]")
		if i == 0 {
			return 0, 0, false
		}
		if i > 0 {
			end = start + i
		}
	}
	value := s[start:end]
	if sep[0] == '=' && strings.TrimRight(sep, " \t") != sep {
		return 0, 0, false // KEY= value: the shell reads an empty value
	}
	switch {
	case (key == "PWD" || key == "OLDPWD") && strings.HasPrefix(value, "/"):
		return 0, 0, false // the shell's working directory
	case codeReference.MatchString(value) || typeName.MatchString(value):
		return 0, 0, false // source code: the value is an expression or a type
	case !quotedKey && strings.Contains(sep, ":") && !strings.Contains(sep, "="):
		// key: value with an unquoted key — YAML, headers, prose: the
		// value runs to the end of the line.
		eol := strings.IndexAny(s[end:], "\r\n")
		if eol < 0 {
			eol = len(s) - end
		}
		end = start + len(strings.TrimRight(s[start:end+eol], " \t"))
	}
	return start, end, true
}

// indexOutsideMask is strings.IndexAny that does not look inside masks.
func indexOutsideMask(s, chars string) int {
	for i := 0; i < len(s); i++ {
		if strings.HasPrefix(s[i:], Mask) {
			i += len(Mask) - 1
			continue
		}
		if strings.IndexByte(chars, s[i]) >= 0 {
			return i
		}
	}
	return -1
}

// codeReference matches a bare value that is a call or an index in source
// code (os.Getenv(, os.environ[, get_password(), not a secret: a dotted or
// snake_case name followed by ( or [.
var codeReference = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*(?:[._][A-Za-z0-9_$]+)+[(\[]`)

// typeName matches a bare value that is a type in a declaration
// (password: string;, token: Option<String>) or a literal that holds no
// secret (null, true).
var typeName = regexp.MustCompile(`^(?:string|str|String|number|int|bool|boolean|any|unknown|null|None|nil|undefined|true|false|bytes|SecretStr|Option|Optional\[.*)[,)]?$`)

// isBasicCredentials reports whether b64 decodes to printable user:password.
func isBasicCredentials(b64 string) bool {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(b64, "="))
		if err != nil {
			return false
		}
	}
	s := string(raw)
	if !utf8.ValidString(s) || !strings.Contains(s, ":") || strings.HasPrefix(s, ":") {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
