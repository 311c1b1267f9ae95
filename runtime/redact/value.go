package redact

import (
	"math"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/wardenrt/warden/internal/lazyre"
)

// What a value after a secret-sounding key looks like decides whether it
// is masked: a literal is, code is not. See docs/redaction.md for the rules
// with examples.

// codeKeywords are bare values that are a keyword, a type or an empty
// literal in some language, never a secret.
var codeKeywords = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`string str String number int int32 int64 uint uint8 uint32 uint64 float float32 float64
		byte bytes rune bool boolean Boolean any unknown object Object void never char long short double
		null None nil NULL Nil undefined true false True False TRUE FALSE yes no
		SecretStr SecretBytes Option Optional
		range func function fn lambda make new len cap append return struct chan map interface type const var let
		this self super await async yield go defer select switch case default break continue else if for while
		import from export package class def end do then fi done in of is not and or`) {
		m[w] = true
	}
	return m
})

// langKeywords are more of a language's words that are also ordinary
// words (module, begin, except): the value of a password written as
// configuration may be one. Only a quoted one in code is told apart:
// token == "except" is a tokenizer's comparison.
var langKeywords = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`elif except finally raise try with as global nonlocal assert del print exec
		typeof instanceof throw catch delete unless elsif begin rescue ensure module`) {
		m[w] = true
	}
	return m
})

var (
	// reFormat: a printf verb (%s, %-10v, %[1]q), a template or format
	// placeholder ({}, {0}, {name}, {{, ${, $(, #{, <%).
	reFormat = lazyre.New(`%(?:\[\d+\])?[-+# 0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[a-zA-Z]|\{\d*\}|\{[A-Za-z_][\w.]*\}|\{\{|\$\{|\$\(|#\{|<%`)
	// reNameWords: words of letters joined by - _ . or camelCase, no
	// digit: X-Auth-Token, access_token, clientSecret.
	reNameWords = lazyre.New(`^[A-Za-z]+(?:[-_.][A-Za-z]+)*$`)
	// reEscapes: a string literal written as escapes only (a character
	// table's "\u3299\ufe0f").
	reEscapes = lazyre.New(`^(?:\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8}|\\x[0-9a-fA-F]{2}|\\[0-7]{3})+$`)
)

// The shapes below are checked by hand, not with regular expressions:
// they run for every candidate value, and a scan is several times faster.

func isIdentStart(c byte) bool { return identStart[c] }
func isIdentByte(c byte) bool  { return identByte[c] }

var identStart, identByte = newByteSet("a-z", "A-Z", "_$"), newByteSet("a-z", "A-Z", "0-9", "_$")

// hasAny is strings.ContainsAny(s, chars) for the ASCII bytes of set.
func hasAny(s string, set *byteSet) bool {
	for i := 0; i < len(s); i++ {
		if set[s[i]] {
			return true
		}
	}
	return false
}

// isIdent: one name ([A-Za-z_$][A-Za-z0-9_$]*).
func isIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentByte(s[i]) {
			return false
		}
	}
	return true
}

// nameChain reads names joined by . :: -> or ?. at the start of s (the
// first may start with @) and returns the bytes read and the names.
func nameChain(s string) (n, names int) {
	i := 0
	if i < len(s) && s[i] == '@' {
		i++
	}
	for {
		if i >= len(s) || !isIdentStart(s[i]) {
			return n, names
		}
		for i < len(s) && isIdentByte(s[i]) {
			i++
		}
		n, names = i, names+1
		switch {
		case strings.HasPrefix(s[i:], "."):
			i++
		case strings.HasPrefix(s[i:], "::"), strings.HasPrefix(s[i:], "->"), strings.HasPrefix(s[i:], "?."):
			i += 2
		default:
			return n, names
		}
	}
}

// isCallOrIndex: a name or a chain of names followed by ( [ { or <: a
// call, an index, a composite literal or a generic type.
func isCallOrIndex(s string) bool {
	n, names := nameChain(s)
	return names > 0 && n < len(s) && strings.IndexByte("([{<", s[n]) >= 0
}

// isSelector: two or more names joined by . (cfg.APIKey, os.environ).
func isSelector(s string) bool {
	n, names := nameChain(s)
	return names >= 2 && n == len(s)
}

// isEnvName: an environment variable's name (WARDEN_MCP_TOKEN, TOKEN).
func isEnvName(s string) bool {
	if len(s) < 2 || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	letters, underscore := true, false
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9':
			letters = false
		case c == '_' && s[i-1] != '_' && i < len(s)-1:
			letters, underscore = false, true
		default:
			return false
		}
	}
	return letters || underscore
}

// isEnvRef: a reference to a variable ($TOKEN, $1, ${X}, $(cmd), %TOKEN%,
// env:TOKEN, ENV[…]).
func isEnvRef(s string) bool {
	switch {
	case len(s) >= 2 && s[0] == '$':
		return isIdentByte(s[1]) || strings.IndexByte("{(@*#?!-", s[1]) >= 0
	case len(s) >= 3 && s[0] == '%':
		end := strings.IndexByte(s[1:], '%')
		return end > 0 && isIdent(s[1:1+end]) && s[1] != '$'
	case strings.HasPrefix(s, "env:") && len(s) > 4:
		return isIdentStart(s[4])
	}
	return strings.HasPrefix(s, "ENV[")
}

// hasFormat: a printf verb or a template placeholder (reFormat).
func hasFormat(s string) bool {
	return hasAny(s, formatStart) && reFormat.MatchString(s)
}

var formatStart, digitsDollar = newByteSet("%{$#<"), newByteSet("0-9", "$")

// placeholders stand where a secret would be written, in documentation
// and examples; they are not one.
var placeholders = map[string]bool{"password": true, "passwd": true, "pass": true, "pw": true, "pwd": true, "secret": true,
	"token": true, "key": true, "apikey": true, "api_key": true, "redacted": true, "masked": true}

// isPlaceholder: a value that stands for a secret without being one — a
// variable-like name in capitals (PASSWORD), <angle brackets>, stars, x's,
// an ellipsis or a value cut by one (sk-...), your-…, a single character,
// a keyword (password), a mask.
func isPlaceholder(v string) bool {
	v = trimCodePunct(v)
	if len(v) <= 1 || isPlaceholderWord(v) || strings.Contains(v, "REDACTED") {
		return true
	}
	switch {
	case isEnvName(v), strings.HasPrefix(v, "<") && strings.HasSuffix(v, ">"):
		return true
	case strings.Trim(v, "*") == "", onlyXs(v), strings.Trim(v, ".") == "", v == "…":
		return true
	case strings.HasSuffix(v, "...") || strings.HasSuffix(v, "…"):
		return true // sk-... : an example, cut
	case len(v) > 4 && strings.EqualFold(v[:4], "your") && !strings.ContainsAny(v, "0123456789"):
		return true // your-api-key, YourTokenHere
	}
	return false
}

// isPlaceholderWord is placeholders[strings.ToLower(v)], without
// lower-casing a copy of an ASCII value.
func isPlaceholderWord(v string) bool {
	var buf [len("password")]byte
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c >= utf8.RuneSelf {
			return placeholders[strings.ToLower(v)] // K (the Kelvin sign) lower-cases to k
		}
		if i == len(buf) {
			return false // longer than every placeholder, and ASCII so far
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return placeholders[string(buf[:len(v)])]
}

// onlyXs is strings.Trim(strings.ToLower(v), "x") == "": x's and X's only.
func onlyXs(v string) bool {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= utf8.RuneSelf:
			return strings.Trim(strings.ToLower(v), "x") == ""
		case c != 'x' && c != 'X':
			return false
		}
	}
	return true
}

// isHexNumber: a number in code (0x1f, 0o17, 0b1): 0, one of xXoObB, and
// hexadecimal digits or _.
func isHexNumber(w string) bool {
	if len(w) < 3 || w[0] != '0' || strings.IndexByte("xXoObB", w[1]) < 0 {
		return false
	}
	for i := 2; i < len(w); i++ {
		if c := w[i]; !isHex(c) && c != '_' {
			return false
		}
	}
	return true
}

// secretFragments: a name holding one of them names a secret; it is not one.
var secretFragments = []string{"pass", "pwd", "secret", "token", "key", "auth", "credential", "cookie", "session", "bearer"}

// codePunct are the bytes after a value that make it an expression in
// code: an argument, a field, a statement's end, a block's start.
const codePunct = ",;)]}{("

// isCodeValue reports whether a bare (unquoted) value is code rather than
// a literal: a keyword or type, a call or index, a selector, an
// operator's operand, a reference to a variable, a format string.
func isCodeValue(v, key string) bool {
	w := trimCodePunct(v)
	if w == "" {
		return true
	}
	switch w[0] {
	case '&', '*', '!', '(', '[', '<', '@', '|', '>', '=', '`':
		return true // &x, *p, !ok, (a), []byte, <-ch, @decorator, | and > (YAML blocks), ==
	}
	switch {
	case isCodeKeyword(w):
		return true // nil, None, Optional?, lambda:
	case strings.EqualFold(w, key), strings.EqualFold(w, lastWord(key)), strings.EqualFold(w, key[strings.LastIndexByte(key, '.')+1:]):
		return true // token: token, self.secret_key = secret_key
	case isCallOrIndex(v), isSelector(w):
		return true
	case isEnvRef(w), hasFormat(w), isEnvName(w):
		return true
	case startsWithMask(w), isPlaceholder(w), isHexNumber(w):
		return true
	case w != v && isIdent(w) && !randomish(w):
		return true // tok, — an argument, a field
	case strings.HasPrefix(w, "-") && len(w) > 1 && (w[1] >= 'a' && w[1] <= 'z'):
		return true // -flag, -x
	}
	return false
}

// isCodeKeyword: w, without a trailing ? or :'s, is one of codeKeywords
// (each form looked up once).
func isCodeKeyword(w string) bool {
	if codeKeywords()[w] {
		return true
	}
	if q := strings.TrimSuffix(w, "?"); q != w && codeKeywords()[q] {
		return true
	}
	c := strings.TrimRight(w, ":")
	return c != w && codeKeywords()[c]
}

// isExpression: a call, an index or a selector — code whatever its
// characters (authorization[1].encode(, base64.decodebytes(x).).
func isExpression(v string) bool {
	return isCallOrIndex(v) || isSelector(strings.TrimRight(v, codePunct+".\\"))
}

// argEnd returns where a value written inside an expression (an argument,
// a field) ends: at the first ), ] or } it did not open, when all that
// follows it in the value is the expression closing (more of ) ] }, then
// : , ; or .): in (pwd=None): the value is None. Otherwise the bracket is part of the
// value (a password holding one: Xy7)kQ9!mN2) and the value ends before
// the trailing run of at most opens closing brackets and , ; : that close
// the expression.
func argEnd(v string, opens int) int {
	depth := 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth > 0 {
				depth--
				continue
			}
			if closesExpression(v[i:]) {
				return i
			}
			// A bracket inside the value: the value runs on.
			end, closers := len(v), 0
			for end > i+1 {
				c := v[end-1]
				if c == ')' || c == ']' || c == '}' {
					if closers == opens {
						break
					}
					closers++
				} else if c != ',' && c != ';' && c != ':' {
					break
				}
				end--
			}
			return end
		}
	}
	return len(v)
}

// closesExpression: rest, starting at a closing bracket, is only the
// expression closing: more closing brackets, then nothing or , ; : or a
// . and a name (a method called on the result).
func closesExpression(rest string) bool {
	i := 0
	for i < len(rest) && (rest[i] == ')' || rest[i] == ']' || rest[i] == '}') {
		i++
	}
	rest = rest[i:]
	switch {
	case rest == "":
		return true
	case rest[0] == ',' || rest[0] == ';' || rest[0] == ':':
		return strings.Trim(rest, ",;:)]}") == "" || rest[0] == ','
	case rest[0] == '.':
		n, names := nameChain(rest[1:])
		return names > 0 && strings.Trim(rest[1+n:], "()[]{},;:") == ""
	}
	return false
}

// namesSecret: a name of two or more words that ends as a key naming a
// secret does (current_token, secret_key, accessToken): a variable that
// holds a secret, not one.
func namesSecret(v string) bool {
	return isVariableName(v) && lastWord(v) != v && keywordKind(asciiLower(v)) != "" && !randomish(v)
}

// isVariableName: a name shaped as code's variables are — lower snake_case
// or lowerCamelCase, no digit (current_token, refreshToken), not a value
// such as Summer2024_password or Winter2023_Secret.
func isVariableName(v string) bool {
	if !isIdent(v) || v[0] >= 'A' && v[0] <= 'Z' || hasAny(v, digitsDollar) {
		return false
	}
	for i := 1; i < len(v); i++ {
		if v[i-1] == '_' && v[i] >= 'A' && v[i] <= 'Z' {
			return false
		}
	}
	return true
}

// secretPrefixes begin a provider's key or token: a value beginning with
// one is not a variable, whatever its shape.
var secretPrefixes = []string{"sk_", "sk-", "rk_", "pk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-",
	"xox", "AKIA", "ASIA", "AIza", "ya29.", "npm_", "pypi-", "hf_", "shpat_", "SG."}

// hasSecretPrefix: v begins as a provider's key does (sk_live_, ghp_, xoxb-).
func hasSecretPrefix(v string) bool {
	for _, p := range secretPrefixes {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}

// memberVariable: a bare value assigned to an object's member that is a
// variable (self.api_secret = secret_value): a name, not random, with no
// digit and no provider's prefix (self.api_key = sk_live_51Hx… and
// self.password = hunter2 are literals).
func memberVariable(v string) bool {
	return isIdent(v) && !randomish(v) && !strings.ContainsAny(v, "0123456789") && !hasSecretPrefix(v)
}

// secretNouns name a secret in prose.
var secretNouns = map[string]bool{"password": true, "passwords": true, "passwd": true, "passphrase": true,
	"token": true, "tokens": true, "secret": true, "secrets": true, "key": true, "keys": true, "apikey": true,
	"credential": true, "credentials": true, "cookie": true, "cookies": true}

// describesSecret: prose that names a secret and is shaped as a
// docstring describing a parameter is — no word with a digit, none
// random, and either a capitalised sentence ending in a full stop ("The
// password for the authentication.", "API key.") or four words or more
// that are capitalised or end in one. "my secret password", "hunter2 is
// my password" and "the key to my heart" are passwords.
func describesSecret(text string) bool {
	words := strings.Fields(text)
	if len(words) < 2 {
		return false
	}
	named := false
	for _, w := range words {
		if randomish(w) || strings.ContainsAny(w, "0123456789") {
			return false
		}
		named = named || secretNouns[strings.ToLower(strings.Trim(w, ".,;:!?()'\"`"))]
	}
	capital := words[0][0] >= 'A' && words[0][0] <= 'Z'
	stop := strings.HasSuffix(text, ".")
	return named && (capital && stop || len(words) >= 4 && (capital || stop))
}

// abnfRules are the rule names a repetition in an RFC's grammar repeats:
// RFC 5234's core rules and the common ones of HTTP's and URIs' grammars.
var abnfRules = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`ALPHA BIT CHAR CR CRLF CTL DIGIT DQUOTE HEXDIG HTAB LF LWSP OCTET SP VCHAR WSP
		tchar token qdtext ctext obs-text pchar unreserved reserved sub-delims gen-delims pct-encoded segment
		token68 b64token cookie-octet cookie-pair attr-char quoted-string quoted-pair field-vchar field-content
		TEXT LWS SEP ALPHANUM alphanum`) {
		m[w] = true
	}
	return m
})

// isRepetition: a grammar's repetition (ABNF's 1*tchar, 1*<any CHAR>,
// *DIGIT), as RFCs and the comments that quote them write it.
func isRepetition(v string) bool {
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	if i == len(v) || v[i] != '*' {
		return false
	}
	for i++; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
	}
	rest := v[i:]
	switch {
	case rest == "":
		return true
	case strings.IndexByte("<([\"%", rest[0]) >= 0:
		return true
	}
	return abnfRules()[rest] // 1*tchar, *DIGIT; not 12*Qwerty or 1*Hunter
}

// lastWord is the last word of a key: token of api.token, Secret of
// hs.masterSecret.
func lastWord(key string) string {
	for i := len(key) - 1; i >= 0; i-- { // strings.LastIndexAny(key, "._-"), without decoding runes
		if c := key[i]; c == '.' || c == '_' || c == '-' {
			key = key[i+1:]
			break
		}
	}
	for i := len(key) - 1; i > 0; i-- {
		if key[i] >= 'A' && key[i] <= 'Z' && key[i-1] >= 'a' && key[i-1] <= 'z' {
			return key[i:]
		}
	}
	return key
}

// quotedIsSecret reports whether a quoted value is a literal secret. In a
// configuration context (the key begins its line) words and spaces are
// secrets too; in code a name ("X-Auth-Token") or prose is not.
func quotedIsSecret(q string, config bool) bool {
	if strings.TrimSpace(q) == "" || isPlaceholder(q) || !strings.ContainsFunc(q, isAlnum) {
		return false
	}
	switch {
	case hasFormat(q), isEnvRef(q), strings.HasPrefix(q, `\`) && reEscapes.MatchString(q):
		return false
	case strings.Contains(q, "://"):
		return false // a URL: url-password masks a password in it
	}
	if config {
		return true
	}
	if codeKeywords()[q] || langKeywords()[q] {
		return false // a language's word: token == "lambda", tok = 'def'
	}
	if strings.ContainsAny(q, " \t") {
		return false // prose: a message, a prefix ("Bearer ")
	}
	if reNameWords.MatchString(q) {
		lower := strings.ToLower(q)
		for _, f := range secretFragments {
			if strings.Contains(lower, f) {
				return false // names a secret: "access_token", "X-Auth-Token"
			}
		}
	}
	if isPath(q) {
		return false
	}
	return true
}

// isPath: an absolute or relative file path with no high-entropy part.
func isPath(q string) bool {
	if !(strings.HasPrefix(q, "/") || strings.HasPrefix(q, "./") || strings.HasPrefix(q, "../") || strings.HasPrefix(q, "~/")) {
		return false
	}
	for _, part := range strings.Split(q, "/") {
		if randomish(part) {
			return false
		}
	}
	return true
}

// randomish reports whether a value looks randomly generated (a key, a
// token), whatever surrounds it: long, letters and digits mixed, high
// entropy, not a name made of words.
func randomish(v string) bool {
	if len(v) < 16 || len(v) > 4096 {
		return false
	}
	var letters, digits, digitRuns int
	prevDigit := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
			if !prevDigit {
				digitRuns++
			}
			prevDigit = true
			continue
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letters++
		case c <= ' ' || c >= 0x7f:
			return false
		}
		prevDigit = false
	}
	if letters < 4 || digits < 2 || digitRuns < 2 {
		return false
	}
	return entropy(v) >= 3.3
}

// entropy is the Shannon entropy of s's bytes, in bits per byte.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	e := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			e -= p * math.Log2(p)
		}
	}
	return e
}

// isNumber: digits, with a sign or a decimal point.
func isNumber(v string) bool {
	v = strings.TrimLeft(v, "+-")
	if v == "" {
		return false
	}
	dot := false
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] >= '0' && v[i] <= '9':
		case v[i] == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return true
}

// lineStartKey reports whether the key at s[keyStart:] begins its line: only
// white space before it, or a configuration prefix (export, set, ENV, a
// YAML list's "-", a comment's "#" or ";", a flag's "--", an opening quote).
func lineStartKey(s string, keyStart int) bool {
	// What may stand before the key is short: a word (export, readonly)
	// and four bytes more, white space aside. Past that many other bytes
	// the key does not begin its line, however long the line is.
	ls, other := keyStart, 0
	for ls > 0 && s[ls-1] != '\n' {
		if c := s[ls-1]; c < utf8.RuneSelf { // unicode.IsSpace, for ASCII
			if !isSpace(c) {
				if other++; other > maxLineStartPrefix {
					return false
				}
			}
			ls--
			continue
		}
		r, size := utf8.DecodeLastRuneInString(s[:ls])
		if !unicode.IsSpace(r) {
			if other += size; other > maxLineStartPrefix {
				return false
			}
		}
		ls -= size
	}
	prefix := strings.TrimSpace(s[ls:keyStart])
	if prefix == "" {
		return true
	}
	for _, w := range []string{"export", "set", "setx", "ENV", "ARG", "declare", "readonly"} {
		if rest, ok := strings.CutPrefix(prefix, w); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			prefix = strings.TrimSpace(rest)
			break
		}
	}
	// What is left, white space aside, must be a list item, a comment, a
	// flag's dashes or an opening quote.
	var b [4]byte
	n := 0
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; c != ' ' && c != '\t' {
			if n == len(b) {
				return false
			}
			b[n] = c
			n++
		}
	}
	switch string(b[:n]) {
	case "", "-", "#", ";", "--", "\"", "'", "-\"", "-'", "#-", "{\"", "{'", "[", "-\\\"", "\\\"":
		return true
	}
	return false
}

// maxLineStartPrefix bounds what lineStartKey reads back: the longest
// word it knows (readonly) and four bytes.
const maxLineStartPrefix = len("readonly") + 4

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r >= 0x80
}
