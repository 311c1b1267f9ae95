package redact

import (
	"encoding/base64"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/wardenrt/warden/internal/lazyre"
)

// A rule finds one kind of secret. Matches are found from anchors — the
// literal text every match starts with — located for all the rules in one
// pass over the text (see scanner), and a regular expression anchored at
// each candidate (RE2: linear in what it reads), after a cheap test (pre)
// where most candidates fail. Candidates inside a span already masked are
// skipped, so the whole pass reads each byte a bounded number of times:
// redaction is linear in the size of the input, whatever the input.
type rule struct {
	// kind names what the rule finds; it is written in the mask
	// ([REDACTED:kind:id]).
	kind string
	// anchors: literal text a match starts with. With fold, they are lower
	// case and searched for in the ASCII-lower-cased text.
	anchors []string
	fold    bool
	// word: the byte before a match must not be a word byte [A-Za-z0-9_].
	word bool
	re   *lazyre.Regexp // starts with ^: matched at the candidate
	// shapes, when set, are re's alternatives, read by hand instead of it
	// (see tokenShape); the rule's span reads only the whole match.
	shapes []tokenShape
	// span returns the part of a match (submatch indices into s) to mask;
	// ok=false leaves it alone. nil masks the whole match.
	span func(s string, m []int) (start, end int, ok bool)
	// skipRun, when set, is the class of the bytes a failed or rejected
	// candidate's match attempt runs over: later candidates inside that run
	// would fail the same way, so they are skipped (this keeps runs like
	// eyJ-eyJ-eyJ-… linear).
	skipRun *byteSet
	// pre, when set, is a cheap test that the regular expression cannot
	// match at the candidate s[p:] (its line ends at le) when it fails: most
	// candidates in prose and code (a word like cookie, bearer or basic, a
	// URL without a password) are dismissed without running it.
	pre func(s string, p, le int) bool
	// find replaces the regular expression machinery for the rules that
	// need more (private keys, key-value pairs): given the positions of
	// the rule's anchors in s, in order, it returns the spans to mask, in
	// order, not overlapping.
	find func(s string, cands []int) []span
	// least, for a rule with find, returns the fewest bytes a match of it
	// holds (see minSecretLen); a rule with re has it from re.
	least func() int
}

// span is a part of the text to mask and the kind of secret it holds.
type span struct {
	start, end int
	kind       string
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

// literalGroup masks submatch n unless it is a reference or a
// placeholder: $PASSWORD, ${DB_PASS}, %s, {{ .Password }}.
func literalGroup(n int) func(string, []int) (int, int, bool) {
	return func(s string, m []int) (int, int, bool) {
		start, end, ok := group(n)(s, m)
		if !ok {
			return 0, 0, false
		}
		v := s[start:end]
		if isEnvRef(v) || hasFormat(v) || isPlaceholder(v) {
			return 0, 0, false
		}
		return start, end, true
	}
}

// pathCredential is the length of the credential a header's value (after
// its scheme) begins with when the header is written into a path: its
// first word, without a trailing ':' or ',', when that word has eight
// bytes or more and a digit; 0 otherwise ("pkg/authorization: fix the
// refresh" is a commit subject).
func pathCredential(v string) int {
	w := v
	if i := strings.IndexAny(v, " \t"); i >= 0 {
		w = v[:i]
	}
	w = strings.TrimRight(w, ":,;")
	if len(w) < 8 || !strings.ContainsAny(w, "0123456789") {
		return 0
	}
	return len(w)
}

// headerValue masks an Authorization or Cookie header's value (submatch
// 1) when it is written as a header — beginning its line, quoted, or
// after a tight = — and is a literal: not a format string, a reference,
// a placeholder or code; a cookie's holds name=value. Quoted in running
// text, a credential has eight bytes or a digit.
func headerValue(cookie bool) func(string, []int) (int, int, bool) {
	return func(s string, m []int) (int, int, bool) {
		start, end, ok := literalGroup(1)(s, m)
		if !ok {
			return 0, 0, false
		}
		keyStart := m[0]
		for keyStart > 0 && keyBytes[s[keyStart-1]] {
			keyStart--
		}
		sep := s[m[0]:start]
		lineStart := lineStartKey(s, keyStart)
		quoted := keyStart > 0 && (s[keyStart-1] == '"' || s[keyStart-1] == '\'')
		tight := strings.Contains(sep, "=") && !strings.ContainsAny(sep, " \t")
		v := s[start:end]
		// A header written into a path (a file named after it, an
		// error quoting the path) begins its path component: its value
		// counts when it begins with a credential (pathCredential).
		if !lineStart && !quoted && !tight {
			if n := pathCredential(v); keyStart > 0 && s[keyStart-1] == '/' && n > 0 {
				return start, start + n, true
			}
			return 0, 0, false // prose: "the authorization: see below"
		}
		first := v
		if i := strings.IndexAny(v, " \t"); i >= 0 {
			first = v[:i]
		}
		switch strings.ToLower(first) {
		case "bearer", "basic", "token", "digest", "negotiate", "ntlm":
			if first == v {
				return 0, 0, false
			}
		}
		if cookie && !strings.Contains(v, "=") {
			return 0, 0, false
		}
		if !cookie && (isCallOrIndex(first) || (isExpression(first) || isCodeValue(first, "authorization")) && !strings.ContainsAny(first, "0123456789")) {
			return 0, 0, false // authorization = authorization[1].encode('ascii')
		}
		if !lineStart && !tight && len(v) < 8 && !strings.ContainsAny(v, "0123456789") {
			return 0, 0, false
		}
		return start, end, true
	}
}

var rules = []rule{
	{
		kind: "private-key", anchors: []string{"-----BEGIN"}, find: findPrivateKeys,
		least: func() int { return regexpMinLen(pemBegin.String()) },
	},
	{
		kind:    "url-password",
		anchors: []string{"://"},
		pre:     urlPasswordPre,
		re:      lazyre.New(`^://[^\s:/?#@"'<>\[\]]*:([^\s/?#"'<>]+)@`),
		span:    literalGroup(1),
	},
	{
		kind:    "anthropic-key",
		anchors: []string{"sk-ant-"},
		word:    true,
		re:      lazyre.New(`^sk-ant-[A-Za-z0-9_-]{20,}`),
		shapes:  []tokenShape{{prefixes: []string{"sk-ant-"}, class: tokenBytes, least: 20}},
	},
	{
		kind:    "openai-key",
		anchors: []string{"sk-"},
		word:    true,
		re:      lazyre.New(`^sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}`),
		shapes:  []tokenShape{{prefixes: []string{"sk-proj-", "sk-svcacct-", "sk-admin-", "sk-None-"}, class: tokenBytes, least: 20}},
	},
	{
		kind:    "openai-key",
		anchors: []string{"sk-"},
		word:    true,
		re:      lazyre.New(`^sk-[A-Za-z0-9]{20,}`),
		shapes:  []tokenShape{{prefixes: []string{"sk-"}, class: alnum, least: 20}},
		span:    withDigit(0),
	},
	{
		kind:    "aws-access-key",
		anchors: []string{"AKIA", "ASIA"},
		word:    true,
		re:      lazyre.New(`^(?:AKIA|ASIA)[A-Z0-9]{16}\b`),
		shapes:  []tokenShape{{prefixes: []string{"AKIA", "ASIA"}, class: upperDigits, least: 16, exact: true, boundary: true}},
	},
	{
		kind:    "github-token",
		anchors: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		word:    true,
		re:      lazyre.New(`^(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})`),
		shapes: []tokenShape{{prefixes: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, class: alnum, least: 30},
			{prefixes: []string{"github_pat_"}, class: wordBytes, least: 22}},
	},
	{
		kind:    "gitlab-token",
		anchors: []string{"gl"},
		pre:     gitlabPre,
		word:    true,
		re:      lazyre.New(`^gl(?:pat|dt|rt|rtr|cbt|ptt|ft|imt|agent|soat|ffct|oas|wt)-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+)*`),
	},
	{
		kind:    "slack-token",
		anchors: []string{"xox", "xapp-"},
		word:    true,
		re:      lazyre.New(`^(?:(?:xox[abprs]|xoxe(?:\.xox[bp])?)-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,})`),
		span:    withDigit(0),
		skipRun: newByteSet("a-z", "A-Z", "0-9", "-"),
	},
	{
		kind:    "slack-webhook",
		anchors: []string{"hooks.slack.com/"},
		re:      lazyre.New(`^hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/-]+)`),
		span:    group(1),
	},
	{
		kind:    "jwt",
		anchors: []string{"eyJ"},
		word:    true,
		re:      lazyre.New(`^eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*`),
		skipRun: tokenBytes,
	},
	{
		kind:    "stripe-key",
		anchors: []string{"sk_live_", "rk_live_", "sk_test_", "rk_test_"},
		word:    true,
		re:      lazyre.New(`^[rs]k_(?:live|test)_[A-Za-z0-9]{16,}`),
		shapes:  []tokenShape{{prefixes: []string{"rk_live_", "rk_test_", "sk_live_", "sk_test_"}, class: alnum, least: 16}},
	},
	{
		kind:    "google-api-key",
		anchors: []string{"AIza"},
		word:    true,
		re:      lazyre.New(`^AIza[0-9A-Za-z_-]{35}`),
		shapes:  []tokenShape{{prefixes: []string{"AIza"}, class: tokenBytes, least: 35, exact: true}},
	},
	{
		kind:    "huggingface-token",
		anchors: []string{"hf_"},
		word:    true,
		re:      lazyre.New(`^hf_[A-Za-z0-9]{30,}\b`),
		shapes:  []tokenShape{{prefixes: []string{"hf_"}, class: alnum, least: 30, boundary: true}},
	},
	{
		kind:    "npm-token",
		anchors: []string{"npm_"},
		word:    true,
		re:      lazyre.New(`^npm_[A-Za-z0-9]{36}\b`),
		shapes:  []tokenShape{{prefixes: []string{"npm_"}, class: alnum, least: 36, exact: true, boundary: true}},
	},
	{
		// Authorization: Bearer x, "authorization": "Basic x", … — the
		// scheme stays, the rest of the value (to the end of the line or
		// the closing quote) goes.
		kind:    "authorization",
		anchors: []string{"authorization"},
		pre:     separatorPre(len("authorization"), ":="),
		fold:    true,
		word:    true,
		re: lazyre.New(`^(?i)authorization\\?["']?[ \t]*[:=][ \t]*\\?["']?` +
			`(?:(?:bearer|basic|token|digest|negotiate|ntlm|aws4-hmac-sha256|apikey|sso-key)[ \t]+)?` +
			`([^\s"'\\=](?:[^\r\n"'\\]*[^\s"'\\])?)`),
		span: headerValue(false),
	},
	{
		kind:    "cookie",
		anchors: []string{"cookie"},
		pre:     separatorPre(len("cookie"), ":"),
		fold:    true,
		word:    true,
		re:      lazyre.New(`^(?i)cookie\\?["']?[ \t]*:[ \t]*\\?["']?([^\s"'\\=](?:[^\r\n"'\\]*[^\s"'\\])?)`),
		span:    headerValue(true),
	},
	{
		kind:    "bearer-token",
		anchors: []string{"bearer"},
		pre:     spacedRunPre(len("bearer"), 16, newByteSet("a-z", "A-Z", "0-9", "._~+/-")),
		fold:    true,
		word:    true,
		re:      lazyre.New(`^(?i)bearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)`),
		span:    withDigit(1),
	},
	{
		kind:    "basic-credentials",
		anchors: []string{"basic"},
		pre:     spacedRunPre(len("basic"), 6, newByteSet("a-z", "A-Z", "0-9", "+/")),
		fold:    true,
		word:    true,
		re:      lazyre.New(`^(?i)basic[ \t]+([A-Za-z0-9+/]{6,}={0,2})`),
		span: func(s string, m []int) (int, int, bool) {
			return m[2], m[3], isBasicCredentials(s[m[2]:m[3]])
		},
	},
	{
		// curl -u user:password, curl --user=user:password
		kind:    "password",
		anchors: []string{"-u", "--user"},
		pre:     curlUserPre,
		re:      lazyre.New(`^(?:-u|--user)(?:[ \t]+|=)['"]?[^\s:'"]+:([^\s'"]+)`),
		span: func(s string, m []int) (int, int, bool) {
			if m[0] > 0 && !isSpace(s[m[0]-1]) {
				return 0, 0, false // not an option: sort-u, x--user
			}
			return literalGroup(1)(s, m)
		},
	},
	{anchors: keyValueAnchors, fold: true, find: findKeyValues, least: keyValueMinLen},
}

// The prechecks of the rules (rule.pre): each fails only where its rule's
// regular expression cannot match (TestRulePrechecks holds them to it).

// urlPasswordPre: "://" and the user's name are followed by ":".
func urlPasswordPre(s string, p, le int) bool {
	j := runEndNot(s, p+len("://"), le, userInfoStop)
	return j < le && s[j] == ':'
}

// userInfoStop ends a URL's user name (url-password's [^\s:/?#@"'<>\[\]]).
var userInfoStop = newByteSet("\t\n\f\r :/?#@\"'<>[]")

// gitlabPre: "gl" is followed by a prefix's letters and "-".
func gitlabPre(s string, p, le int) bool {
	i := strings.IndexByte(s[p+2:min(p+len("glagent-"), le)], '-')
	return i >= 2
}

// separatorPre: the header's name of n bytes is followed by an optional
// backslash and quote, spaces or tabs, one of seps, spaces or tabs, an
// optional backslash and quote, and a byte that may begin its value.
func separatorPre(n int, seps string) func(string, int, int) bool {
	return func(s string, p, le int) bool {
		i := skipQuote(s, p+n, le)
		for i < le && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		if i == le || strings.IndexByte(seps, s[i]) < 0 {
			return false
		}
		i++
		for i < le && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		i = skipQuote(s, i, le)
		return i < le && !headerValueStop[s[i]]
	}
}

// skipQuote skips an optional backslash, then an optional quote.
func skipQuote(s string, i, le int) int {
	if i < le && s[i] == '\\' {
		i++
	}
	if i < le && (s[i] == '"' || s[i] == '\'') {
		i++
	}
	return i
}

// headerValueStop cannot begin a header's value ([^\s"'\\=]).
var headerValueStop = newByteSet("\t\n\f\r \"'\\=")

// spacedRunPre: the keyword of n bytes is followed by spaces or tabs and
// at least `least` bytes of set.
func spacedRunPre(n, least int, set *byteSet) func(string, int, int) bool {
	return func(s string, p, le int) bool {
		i := p + n
		if i == le || s[i] != ' ' && s[i] != '\t' {
			return false
		}
		for i < le && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		return runEnd(s[:le], i, set)-i >= least
	}
}

// curlUserPre: -u or --user is followed by a space, a tab or "=".
func curlUserPre(s string, p, le int) bool {
	i := p + len("-u")
	if strings.HasPrefix(s[p:le], "--user") {
		i = p + len("--user")
	}
	return i < le && (s[i] == ' ' || s[i] == '\t' || s[i] == '=')
}

func isSpace(c byte) bool { return asciiSpace[c] }

var asciiSpace = newByteSet("\t\n\v\f\r ")

// findPatterns returns what every rule finds in s, in no particular
// order; spans of different rules may overlap. The anchors of all the
// rules are found in one pass over s (see scanner).
func findPatterns(s string) []span {
	if s == "" {
		return nil
	}
	cands := rulesScanner().scan(s)
	defer cands.put()
	var spans []span
	for i := range rules {
		list := cands.byRule[i]
		if len(list) == 0 {
			continue
		}
		if rules[i].find != nil {
			spans = append(spans, rules[i].find(s, list)...)
		} else {
			spans = rules[i].appendSpans(spans, s, list)
		}
	}
	return spans
}

// mergeSpans sorts spans and merges those that overlap or touch; a merged
// span keeps the kind of the one that starts first (the longer one on a
// tie).
func mergeSpans(spans []span) []span {
	if len(spans) == 0 {
		return spans
	}
	slices.SortFunc(spans, func(a, b span) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	merged := spans[:1]
	for _, sp := range spans[1:] {
		top := &merged[len(merged)-1]
		if sp.start <= top.end {
			top.end = max(top.end, sp.end)
			continue
		}
		merged = append(merged, sp)
	}
	return merged
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

// appendSpans runs an anchored rule over s, given the positions of its
// anchors in order, and appends what it finds to out.
func (r *rule) appendSpans(out []span, s string, cands []int) []span {
	last := 0 // end of the last masked span
	skip := 0 // candidates before skip are known to fail
	it := cursor{list: cands}
	le := -1         // the end of the line of the last candidate read
	var whole [2]int // a shape's match
	for p := it.from(0); p >= 0; p = it.from(max(p+1, last, skip)) {
		if r.word && p > 0 && wordBytes[s[p-1]] && !afterPercentEscape(s, p) {
			continue
		}
		if p > le {
			le = lineEnd(s, p)
		}
		var m []int
		switch {
		case r.pre != nil && !r.pre(s, p, le):
		case r.shapes != nil:
			if end := matchShapes(r.shapes, s[p:le]); end >= 0 {
				whole = [2]int{0, end}
				m = whole[:]
			}
		default:
			m = r.re.FindStringSubmatchIndex(s[p:le])
		}
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
		if !ok || start < last || isMask(s[start:end]) {
			continue
		}
		out = append(out, span{start, end, r.kind})
		last = end
	}
	return out
}

// afterPercentEscape reports whether s[:p] ends with a URL's percent
// escape (%3D, %22, %3A): in URL-encoded text (a query, a form) the escape
// of "=" or a quote is what separates a token from the text before it,
// not a letter or a digit of a longer word.
func afterPercentEscape(s string, p int) bool {
	return p >= 3 && s[p-3] == '%' && isHex(s[p-2]) && isHex(s[p-1])
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// lineEnd returns the end of the line s[p:] is on. Every rule's regular
// expression matches within one line, and on a short input Go's regexp
// package uses its backtracker, several times faster than the NFA. The
// candidates of a pass come in order, and a pass asks again only for a
// candidate past the line end it knows: a long line is read once, not
// once a candidate.
func lineEnd(s string, p int) int {
	if i := strings.IndexByte(s[p:], '\n'); i >= 0 {
		return p + i
	}
	return len(s)
}

// runEnd returns the end of the run of bytes in set that starts at p.
func runEnd(s string, p int, set *byteSet) int {
	for p < len(s) && set[s[p]] {
		p++
	}
	return p
}

var (
	pemBegin = lazyre.New(`^-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`)
	pemEnd   = lazyre.New(`-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`)
	pemBody  = newByteSet("a-z", "A-Z", "0-9", "+/=:,.-\\", " \t\r\n")
)

// findPrivateKeys masks PEM private key blocks from BEGIN to END, or, with
// the END line missing (truncated output), to the end of the base64 body.
func findPrivateKeys(s string, cands []int) []span {
	var out []span
	endAt := -2 // cached start of the next END line after the last search; -1: none left
	var endLen int
	it := cursor{list: cands}
	for pos := 0; pos < len(s); {
		p := it.from(pos)
		if p < 0 {
			break
		}
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
		out = append(out, span{p, end, "private-key"})
		pos = end
	}
	return out
}

// keyValueKeywords end the keys whose values are masked, each with the
// kind of secret it names; keyValueAnchors find them (every keyword
// contains one).
var (
	keyValueKeywords = []struct{ word, kind string }{
		{"passwd", "password"}, {"password", "password"}, {"passphrase", "password"}, {"pwd", "password"},
		{"apikey", "api-key"}, {"api_key", "api-key"}, {"api-key", "api-key"},
		{"accesskey", "access-key"}, {"access_key", "access-key"}, {"access-key", "access-key"},
		{"secretkey", "secret-key"}, {"secret_key", "secret-key"}, {"secret-key", "secret-key"},
		{"privatekey", "private-key"}, {"private_key", "private-key"}, {"private-key", "private-key"},
		{"secret", "secret"}, {"token", "token"}, {"credential", "credential"}, {"credentials", "credential"},
		// Rails' secret_key_base signs and encrypts its sessions.
		{"secret_key_base", "secret-key"}, {"secretkeybase", "secret-key"},
	}
	keyValueAnchors = []string{"pass", "pwd", "secret", "token", "key", "credential"}

	// keyValueRest follows the key: 1 a quote closing the key, 2 the
	// separator, 3-5 quoted values, 6 a bare value. Group 4 is a value
	// quoted inside a JSON string (\"value\"): it may hold JSON's escapes
	// (\u003c, \\u0026 a level deeper, \\\" a quote a level deeper).
	keyValueRest = lazyre.New(`^(\\?["']?)([ \t]*(?::=|==?|:)[ \t]*)` +
		`(?:"((?:[^"\\\r\n]|\\.)*)"|\\"((?:[^"\\\r\n]|\\\\\\"|\\[^"\r\n])*)\\"|'([^'\r\n]*)'|([^\s"'\\&;<>{]+))`)
)

// bareStop are the bytes that end a bare value (keyValueRest's group 6:
// white space as RE2's \s knows it, quotes, a backslash, & ; < > {).
var bareStop = newByteSet("\t\n\f\r \"'\\&;<>{")

// keyValueRestAt matches keyValueRest at s[e:le] (a line's rest, so no
// line break) with the indices of its submatches into s in m, without the
// regular expression where the first choice of each of its parts decides
// the match: the key's closing quote and the separator are read as the
// expression reads them first, and a value that matches then is the one
// it returns. decided is false where that value fails and backtracking
// might read another separator ("token:=" read as ":" and a bare "="): the
// regular expression is asked then. Where no separator follows, nothing
// can match.
func keyValueRestAt(s string, e, le int, m *[14]int) (matched, decided bool) {
	i := e
	if i < le && s[i] == '\\' {
		i++
	}
	if i < le && (s[i] == '"' || s[i] == '\'') {
		i++
	}
	m[0], m[2], m[3], m[4] = e, e, i, i
	for i < le && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	switch {
	case i+1 < le && (s[i] == ':' || s[i] == '=') && s[i+1] == '=':
		i += 2 // := or ==
	case i < le && (s[i] == ':' || s[i] == '='):
		i++
	default:
		return false, true
	}
	for i < le && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	m[5] = i
	for g := 3; g <= 6; g++ {
		m[2*g], m[2*g+1] = -1, -1
	}
	if i == le {
		return false, false
	}
	v, j := i, i+1
	switch s[v] {
	case '"': // group 3: escapes are a backslash and any byte but a line feed
		for j < le && s[j] != '"' && s[j] != '\r' {
			if s[j] == '\\' {
				if j+1 == le {
					break
				}
				j++
			}
			j++
		}
		if j < le && s[j] == '"' {
			m[6], m[7], m[1] = v+1, j, j+1
			return true, true
		}
	case '\'': // group 5
		for j < le && s[j] != '\'' && s[j] != '\r' {
			j++
		}
		if j < le && s[j] == '\'' {
			m[10], m[11], m[1] = v+1, j, j+1
			return true, true
		}
	default: // group 6, or nothing (a backslash: group 4, which the expression reads)
		j = runEndNot(s, v, le, bareStop)
		if j > v {
			m[12], m[13], m[1] = v, j, j
			return true, true
		}
	}
	return false, false
}

// runEndNot returns the end, at most le, of the run of bytes not in set
// that starts at p.
func runEndNot(s string, p, le int, set *byteSet) int {
	for p < le && !set[s[p]] {
		p++
	}
	return p
}

// findKeyValues masks the values of KEY=value, key: value, "key": "value"
// and 'key': 'value' pairs whose key ends in a keyword, when the value is
// a literal (see keyValueSpan).
func findKeyValues(s string, cands []int) []span {
	var out []span
	last, lastWordEnd := 0, -1
	le := -1 // the end of the line of the last key read
	scan := &lineScan{s: s}
	it := cursor{list: cands}
	for p := it.from(0); p >= 0; p = it.from(max(p+1, last)) {
		e := runEnd(s, p, wordBytes)
		if e == lastWordEnd {
			continue
		}
		lastWordEnd = e
		if e > le {
			le = lineEnd(s, e)
		}
		// What follows the key is read first: most words that end in a
		// keyword (in code, in prose) are followed by no separator.
		var mbuf [14]int
		m := mbuf[:]
		matched, decided := keyValueRestAt(s, e, le, &mbuf)
		if decided && !matched {
			continue
		}
		kind := keywordKindAt(s, e)
		if kind == "" || inMaskKind(s, p) {
			continue
		}
		if !decided {
			if m = keyValueRest.FindStringSubmatchIndex(s[e:le]); m == nil {
				continue
			}
			for i := range m {
				if m[i] >= 0 {
					m[i] += e
				}
			}
		}
		keyStart := e
		for keyStart > 0 && keyBytes[s[keyStart-1]] {
			keyStart--
		}
		for !wordBytes[s[keyStart]] {
			keyStart++
		}
		start, end, ok := keyValueSpan(s, keyStart, s[keyStart:e], m, scan)
		if !ok || start < last || isMask(s[start:end]) {
			continue
		}
		out = append(out, span{start, end, kind})
		last = end
	}
	return out
}

// inMaskKind reports whether s[p] lies in the kind of a mask
// ("[REDACTED:github-token:…]"): not a key.
func inMaskKind(s string, p int) bool {
	i := p
	for i > 0 && p-i < 48 && (s[i-1] >= 'a' && s[i-1] <= 'z' || s[i-1] >= '0' && s[i-1] <= '9' || s[i-1] == '-') {
		i--
	}
	return strings.HasSuffix(s[:i], maskPrefix+":")
}

// keywordKindAt is keywordKind of s[:e] lower-cased, comparing in place
// the keywords that end as s[:e] does.
func keywordKindAt(s string, e int) string {
	if e == 0 {
		return ""
	}
	last := s[e-1]
	if 'A' <= last && last <= 'Z' {
		last += 'a' - 'A'
	}
	for _, i := range keywordsByLast[last] {
		if k := keyValueKeywords[i]; len(k.word) <= e && hasAnchor(s[e-len(k.word):e], k.word, true) {
			return k.kind
		}
	}
	return ""
}

// maxKeywordLen is the length of the longest of keyValueKeywords.
const maxKeywordLen = len("secret_key_base")

// keywordKind returns the kind of secret a key ending in a keyword names,
// or "".
func keywordKind(s string) string {
	if s == "" {
		return ""
	}
	for _, i := range keywordsByLast[s[len(s)-1]] {
		if k := keyValueKeywords[i]; strings.HasSuffix(s, k.word) {
			return k.kind
		}
	}
	return ""
}

// keywordsByLast lists, for each byte, the keywords that end with it, by
// index in keyValueKeywords, in order.
var keywordsByLast = func() (by [256][]uint8) {
	for i, k := range keyValueKeywords {
		last := k.word[len(k.word)-1]
		by[last] = append(by[last], uint8(i))
	}
	return by
}()

// keyValueSpan picks the value to mask after the key at s[keyStart:], or
// says there is none; m holds keyValueRest's submatches (indices into s).
// A value is masked when it is a literal, not code (the rules, with
// examples, are in docs/redaction.md):
//
//   - after := and ==, only a quoted literal (code compares or assigns
//     expressions);
//   - a quoted value unless it is empty, a format string, a reference or
//     name of a variable, a URL, or — in code — prose, a path or a name
//     that itself names a secret ("X-Auth-Token");
//   - a bare value, unless it is code (a keyword or type, a call, an
//     index, a selector, an operand, a variable, the key's own name),
//     when the pair is written as configuration: KEY=value with nothing
//     around =; after a quoted key (JSON-ish: a number or a word); a key
//     beginning its line followed by ": " (YAML, headers: the value runs
//     to the end of the line) or by " = " (INI, TOML: a snake_case,
//     kebab-case or upper-case key, or a value that is not a plain
//     name);
//   - anywhere else, a bare value that looks random (randomish).
func keyValueSpan(s string, keyStart int, key string, m []int, scan *lineScan) (int, int, bool) {
	quotedKey := m[2] < m[3]
	sepText := s[m[4]:m[5]]
	sep := trimSpaceTab(sepText)
	spaced := sep != sepText
	code := sep == ":=" || sep == "=="
	// lineStart: the key begins a configuration line (asked once).
	lsKnown, ls := false, false
	lineStart := func() bool {
		if !lsKnown {
			// Ruby's @password = … begins its line too.
			lsKnown, ls = true, !code && (lineStartKey(s, keyStart) ||
				keyStart > 0 && s[keyStart-1] == '@' && lineStartKey(s, keyStart-1))
		}
		return ls
	}
	for g := 3; g <= 5; g++ {
		if m[2*g] >= 0 {
			start, end := m[2*g], m[2*g+1]
			quoteEnd := end + 1
			if g == 4 {
				quoteEnd++
			}
			cfg := (quotedKey || restOfLineBlank(s, quoteEnd)) && lineStart()
			if !quotedIsSecret(s[start:end], cfg) {
				return 0, 0, false
			}
			return start, end, true
		}
	}
	if code {
		return 0, 0, false
	}
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
	argument := false // the value is an argument, a bracket closing it
	if !quotedKey && !lineStart() {
		if opens := scan.openBrackets(keyStart); opens > 0 {
			// Inside an expression (an argument, a field): the value
			// ends where the expression closes; the rest is not part of
			// it. A bracket followed by more of the value is the
			// value's own, and the value is masked whole.
			if e := start + argEnd(s[start:end], opens); e > start {
				end = e
				argument = end < len(s) && strings.IndexByte(")]}", s[end]) >= 0
			}
		}
	}
	// What code reads: an argument with the bracket closing it
	// (f(token=tok).strip(): tok) is an argument, as tok, is).
	codeValue := s[start:end]
	if argument {
		codeValue = s[start : end+1]
	}
	value := s[start:end]
	if sepText[0] == '=' && strings.TrimRight(sepText, " \t") != sepText {
		return 0, 0, false // KEY= value: the shell reads an empty value
	}
	if (key == "PWD" || key == "OLDPWD") && strings.HasPrefix(value, "/") {
		return 0, 0, false // the shell's working directory
	}
	if isCodeValue(codeValue, key) {
		return 0, 0, false
	}
	if name := trimCodePunct(value); namesSecret(name) && inCode(key, name, sep, spaced, lineStart()) ||
		memberKey(s, keyStart, key) && memberVariable(name) {
		return 0, 0, false // cache_token = current_token, self.api_secret = value
	}
	if spaced && sep == "=" && isRepetition(value) {
		return 0, 0, false // a grammar: token = 1*tchar
	}
	switch {
	case quotedKey:
		if spaced && isIdent(value) && !randomish(value) {
			return 0, 0, false // "token": tok — a map literal in code
		}
		return start, end, true
	case !spaced:
		return start, end, true // KEY=value, a --flag=value
	case sep == ":" && lineStart():
		// key: value beginning a line — YAML, headers: the value runs to
		// the end of the line, unless the line is code (a field of a
		// literal ends with a comma, a block opens).
		eol := strings.IndexAny(s[end:], "\r\n")
		if eol < 0 {
			eol = len(s) - end
		}
		line := strings.TrimRight(s[start:end+eol], " \t")
		if strings.ContainsAny(line[len(line)-1:], codePunct) && !randomish(value) {
			return 0, 0, false
		}
		if describesSecret(line) {
			return 0, 0, false // password: The password for the authentication.
		}
		return start, start + len(line), true
	case sep == "=" && isNumber(value) && lineStart():
		return 0, 0, false // NAME = 447: a constant in code
	case sep == "=" && (configKey(key) || !isIdent(value) || strings.ContainsAny(value, "0123456789")) && lineStart():
		return start, end, true
	case randomish(trimCodePunct(value)):
		return start, start + len(trimCodePunct(value)), true
	}
	return 0, 0, false
}

// inCode reports whether a pair whose value names a secret (namesSecret)
// is code assigning a variable rather than configuration: inside an
// expression, or "key = value" where code is written — not a YAML or
// header line (key: value beginning its line), not KEY=value, not an
// upper-case key (a configuration's or a constant's), and not a value
// that is the key itself behind a prefix (api_key = my_api_key,
// API_TOKEN = team_api_token: a made-up literal, as a variable is named
// for where it comes from: cache_token = current_token).
func inCode(key, value, sep string, spaced, lineStart bool) bool {
	if !lineStart {
		return true
	}
	if !spaced || sep != "=" || strings.ToUpper(key) == key {
		return false
	}
	k := asciiLower(key[strings.LastIndexByte(key, '.')+1:])
	if lastWord(k) != k && strings.HasSuffix(asciiLower(value), k) {
		return false
	}
	return true
}

// openBrackets counts the brackets ( [ { opened and not closed on the
// key's line before it, when the key is an argument or a field: right
// after one of them or after a comma. Otherwise (a command line, a URL)
// it is 0.
func openBrackets(s string, keyStart int) int {
	return (&lineScan{s: s}).openBrackets(keyStart)
}

// lineScan reads the text before the keys of one pass, in order, once: for
// the position it has reached, the start of its line and the brackets
// opened and not closed since. A long line holding many keys is read once,
// not once a key.
type lineScan struct {
	s         string
	pos       int // how far it has read
	lineStart int // the start of pos's line
	depth     int // brackets open in s[lineStart:pos]
}

// advance reads on to to (from the start again if to is behind).
func (ls *lineScan) advance(to int) {
	if to < ls.pos {
		ls.pos, ls.lineStart, ls.depth = 0, 0, 0
	}
	from := ls.pos
	if i := strings.LastIndexByte(ls.s[from:to], '\n'); i >= 0 {
		from = from + i + 1
		ls.lineStart, ls.depth = from, 0
	}
	depth, line := ls.depth, ls.s[from:to]
	for i := 0; i < len(line); i++ {
		if d := bracketStep[line[i]]; d != 0 {
			if depth += int(d); depth < 0 {
				depth = 0 // a bracket closed that the line did not open
			}
		}
	}
	ls.pos, ls.depth = to, depth
}

// bracketStep is +1 for a bracket that opens, -1 for one that closes.
var bracketStep = [256]int8{'(': 1, '[': 1, '{': 1, ')': -1, ']': -1, '}': -1}

// openBrackets is openBrackets for the key at keyStart.
func (ls *lineScan) openBrackets(keyStart int) int {
	ls.advance(keyStart)
	i := keyStart
	for i > ls.lineStart && (ls.s[i-1] == ' ' || ls.s[i-1] == '\t') {
		i--
	}
	if i == ls.lineStart || strings.IndexByte("([{,", ls.s[i-1]) < 0 {
		return 0
	}
	return ls.depth
}

// memberKey: the key is a member of an object in code (self.secret,
// this.token, cls.key, Ruby's @secret): a bare name after it is a
// variable.
func memberKey(s string, keyStart int, key string) bool {
	for _, p := range []string{"self.", "this.", "cls."} {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return keyStart > 0 && s[keyStart-1] == '@'
}

// configKey: a key written as configuration keys are, not as code names
// are: snake_case, kebab-case or upper case.
func configKey(key string) bool {
	if strings.ContainsAny(key, "_-") {
		return true
	}
	return strings.ToUpper(key) == key
}

// restOfLineBlank reports whether only white space, a comma or a comment
// follows s[i:] on its line.
func restOfLineBlank(s string, i int) bool {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\r' || r == '\n' {
			return true
		}
		if !unicode.IsSpace(r) {
			return r == '#' || r == ';'
		}
		i += size
	}
	return true
}

// trimSpaceTab is strings.Trim(s, " \t").
func trimSpaceTab(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// trimCodePunct is strings.TrimRight(s, codePunct), without building the
// set at each call.
func trimCodePunct(s string) string {
	for s != "" && codePunctSet[s[len(s)-1]] {
		s = s[:len(s)-1]
	}
	return s
}

var codePunctSet = newByteSet(codePunct)

// indexOutsideMask is strings.IndexAny that does not look inside masks.
func indexOutsideMask(s, chars string) int {
	for i := 0; i < len(s); i++ {
		if startsWithMask(s[i:]) {
			end, _, _ := parseMask(s, i)
			i = end - 1
			continue
		}
		if strings.IndexByte(chars, s[i]) >= 0 {
			return i
		}
	}
	return -1
}

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
