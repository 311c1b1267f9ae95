package redact

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The one-pass scanner and the shortcuts in front of the regular
// expressions must change nothing: each is held here to what it replaces
// or guards, on generated text dense in anchors, separators, quotes and
// escapes, and in FuzzScan on whatever the fuzzer makes.

// scanPieces are what the generated texts are made of.
var scanPieces = []string{
	"password", "PassWord", "passwd", "pwd", "secret", "SECRET", "token", "Token", "key", "KEY", "credential", "secret_key_base",
	"api_key", "authorization", "Authorization", "AUTHORIZATION", "cookie", "Cookie", "bearer", "Bearer", "basic", "BASIC",
	"sk-", "sk-ant-", "sk-proj-", "AKIA", "ASIA", "ghp_", "github_pat_", "gl", "glpat-", "glagent-", "xox", "xoxb-", "xapp-",
	"hooks.slack.com/", "eyJ", "sk_live_", "rk_test_", "AIza", "hf_", "npm_", "-u", "--user", "://", "-----BEGIN",
	"[REDACTED", "[REDACTED]", "\\", "\\\\\\\"", "\"", "'", ":", "=", ":=", "==", " ", "\t", "\r", "\n", "\f", "\v", "&", ";",
	"<", ">", "{", "}", "(", ")", "[", "]", ",", "@", "/", "?", "#", ".", "-", "_", "+", "~", "%3D", "é", "\xff", "K",
	"a", "Z", "0", "9", "abcdefghijklmnopqrstuvwxyz0123456789", "QUJDREVGR0g=", "dXNlcjpwYXNz",
}

// scanDense is a small alphabet of what decides a key's value: a text
// of it is a maze of separators, quotes and escapes.
var scanDense = []string{"token", "Bearer", "://", "-u", ":", "=", "\"", "'", "\\", " ", "\t", "\r", "\n", "a", "1", "é", "\xff", "&", "{", "@", "/"}

func genScanText(rng *rand.Rand) string {
	pieces := scanPieces
	if rng.Intn(2) == 0 {
		pieces = scanDense
	}
	var b strings.Builder
	for range 1 + rng.Intn(24) {
		b.WriteString(pieces[rng.Intn(len(pieces))])
	}
	return b.String()
}

// naiveCandidates is what searching s once for each anchor of each rule
// finds (in s lower-cased for the rules that fold case): every position
// where one of the rule's anchors starts, in order.
func naiveCandidates(s string) [][]int {
	lower := asciiLower(s)
	out := make([][]int, len(rules))
	for ri, r := range rules {
		text := s
		if r.fold {
			text = lower
		}
		for p := 0; p < len(text); p++ {
			for _, a := range r.anchors {
				if strings.HasPrefix(text[p:], a) {
					out[ri] = append(out[ri], p)
					break
				}
			}
		}
	}
	return out
}

func checkScan(t *testing.T, s string) {
	t.Helper()
	c := rulesScanner().scan(s)
	defer c.put()
	want := naiveCandidates(s)
	for ri := range rules {
		if !slices.Equal(c.byRule[ri], want[ri]) {
			t.Fatalf("rule %d (%s) in %q: scanned %v, anchors at %v", ri, rules[ri].kind, s, c.byRule[ri], want[ri])
		}
	}
}

func checkPrechecks(t *testing.T, s string) {
	t.Helper()
	for p := range len(s) {
		le := lineEnd(s, p)
		for ri, r := range rules {
			if r.pre == nil || !hasAnyAnchor(s[p:], r) {
				continue
			}
			if !r.pre(s, p, le) && r.re.FindStringSubmatchIndex(s[p:le]) != nil {
				t.Fatalf("rule %d (%s): the precheck dismisses %q at %d, which the expression matches", ri, r.kind, s, p)
			}
		}
	}
}

func hasAnyAnchor(s string, r rule) bool {
	if r.fold {
		s = asciiLower(s)
	}
	for _, a := range r.anchors {
		if strings.HasPrefix(s, a) {
			return true
		}
	}
	return false
}

func checkKeyValueRest(t *testing.T, s string) {
	t.Helper()
	for e := range len(s) + 1 {
		le := lineEnd(s, min(e, len(s)))
		if e > le {
			continue
		}
		var m [14]int
		matched, decided := keyValueRestAt(s, e, le, &m)
		if !decided {
			continue
		}
		want := keyValueRest.FindStringSubmatchIndex(s[e:le])
		if !matched {
			if want != nil {
				t.Fatalf("%q at %d: no match read, the expression matches %v", s, e, want)
			}
			continue
		}
		for i := range want {
			if want[i] >= 0 {
				want[i] += e
			}
		}
		if !slices.Equal(m[:], want) {
			t.Fatalf("%q at %d: read %v, the expression %v", s, e, m, want)
		}
	}
}

// TestScanMatchesAnchors: the scanner's candidates are the anchors'
// occurrences; each precheck dismisses only what its expression cannot
// match; the key-value reader decides as the expression does.
func TestScanMatchesAnchors(t *testing.T) {
	n := 20000
	if testing.Short() || raceEnabled { // raceEnabled: one goroutine, nothing to race, 10× the time
		n = 2000
	}
	rng := rand.New(rand.NewSource(18))
	for range n {
		s := genScanText(rng)
		checkScan(t, s)
		checkPrechecks(t, s)
		checkKeyValueRest(t, s)
	}
	for _, s := range []string{"", "a", "gl", "token:= \"x", "token:=\"x\\", "token =\\\"a\\\\\\\"b\\\"", "Authorization: Bearer abcdefghijklmnop1",
		"curl -u a:b --user=c:d", "x://u:p@h", "glpat-abcdefghijklmnopqrstuv", "cookie \t: a=b"} {
		checkScan(t, s)
		checkPrechecks(t, s)
		checkKeyValueRest(t, s)
	}
}

func FuzzScan(f *testing.F) {
	rng := rand.New(rand.NewSource(1))
	for range 20 {
		f.Add(genScanText(rng))
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkScan(t, s)
		checkPrechecks(t, s)
		checkKeyValueRest(t, s)
		checkShapes(t, s)
	})
}

// TestMaxKeywordLen: keywordKindAt reads enough of a key for the longest
// keyword.
func TestMaxKeywordLen(t *testing.T) {
	for _, k := range keyValueKeywords {
		if len(k.word) > maxKeywordLen {
			t.Fatalf("keyword %q is longer than maxKeywordLen %d", k.word, maxKeywordLen)
		}
	}
}

// TestKeywordKindAt: keywordKindAt is keywordKind of the lower-cased key.
func TestKeywordKindAt(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for range 20000 {
		s := genScanText(rng)
		for e := range len(s) + 1 {
			if got, want := keywordKindAt(s, e), keywordKindSlow(asciiLower(s[:e])); got != want {
				t.Fatalf("%q[:%d]: %q, want %q", s, e, got, want)
			}
		}
	}
}

// TestTrims: the trims written out are the strings functions they stand
// for.
func TestTrims(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for range 20000 {
		s := genScanText(rng) + strings.Repeat(codePunct[rng.Intn(len(codePunct)):], rng.Intn(3))
		if got, want := trimCodePunct(s), strings.TrimRight(s, codePunct); got != want {
			t.Fatalf("trimCodePunct(%q) = %q, want %q", s, got, want)
		}
		if got, want := trimSpaceTab(s), strings.Trim(s, " \t"); got != want {
			t.Fatalf("trimSpaceTab(%q) = %q, want %q", s, got, want)
		}
		if got, want := keywordKind(s), keywordKindSlow(s); got != want {
			t.Fatalf("keywordKind(%q) = %q, want %q", s, got, want)
		}
	}
}

func keywordKindSlow(s string) string {
	for _, k := range keyValueKeywords {
		if strings.HasSuffix(s, k.word) {
			return k.kind
		}
	}
	return ""
}

// TestHasSensitivePart: the one-pass test is the lower-cased search it
// replaces, the Kelvin sign and the dotted I (which lower-case to ASCII)
// included.
func TestHasSensitivePart(t *testing.T) {
	slow := func(raw []byte) bool {
		lower := strings.ToLower(string(raw))
		for _, p := range sensitiveKeyParts {
			if strings.Contains(lower, p) {
				return true
			}
		}
		return false
	}
	rng := rand.New(rand.NewSource(5))
	extra := []string{"\u212aey", "credent\u0130al", "AUTH", "Sess", "coOKie", "pa", "ss", "\u017fecret"}
	for range 20000 {
		s := genScanText(rng)
		if rng.Intn(4) == 0 {
			s += extra[rng.Intn(len(extra))]
		}
		if got, want := hasSensitivePart([]byte(s)), slow([]byte(s)); got != want {
			t.Fatalf("hasSensitivePart(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestCleanTextIsReadNotCopied: a text with nothing to mask is read in
// one pass that neither copies it (no lower-cased copy for the rules that
// fold case) nor allocates for each rule: a megabyte of prose costs a few
// small allocations, not megabytes.
func TestCleanTextIsReadNotCopied(t *testing.T) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", (1<<20)/45)
	if Contains(text) {
		t.Fatal("the text holds a secret")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 8
	for range runs {
		if String(text) != text {
			t.Fatal("the text was changed")
		}
	}
	runtime.ReadMemStats(&after)
	if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun > uint64(len(text))/16 {
		t.Errorf("redacting %d bytes of clean text allocated %d bytes a time", len(text), perRun)
	}
	if allocs := testing.AllocsPerRun(runs, func() { String(text) }); allocs > 8 {
		t.Errorf("redacting clean text made %.0f allocations a time", allocs)
	}
}

// TestValueShapes: the value tests written out are the expressions they
// replace.
func TestValueShapes(t *testing.T) {
	hex := regexp.MustCompile(`^0[xXoObB][0-9a-fA-F_]+$`)
	for p := range placeholders {
		if len(p) > len("password") {
			t.Fatalf("placeholder %q is longer than isPlaceholderWord reads", p)
		}
	}
	rng := rand.New(rand.NewSource(11))
	pieces := []string{"0", "x", "X", "o", "b", "B", "f", "_", "g", "password", "PassWord", "\u212aey", "T\u0130KEN", "api_key",
		"REDACTED", "x\u0130", "é", "1", "-", "*", "."}
	for range 50000 {
		var b strings.Builder
		for range rng.Intn(5) {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		v := b.String()
		if got, want := isPlaceholderWord(v), placeholders[strings.ToLower(v)]; got != want {
			t.Fatalf("isPlaceholderWord(%q) = %v, want %v", v, got, want)
		}
		if got, want := onlyXs(v), strings.Trim(strings.ToLower(v), "x") == ""; got != want {
			t.Fatalf("onlyXs(%q) = %v, want %v", v, got, want)
		}
		if got, want := isHexNumber(v), hex.MatchString(v); got != want {
			t.Fatalf("isHexNumber(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestReplaceCompactJSON: for json.Marshal's output, ReplaceCompactJSON
// is ReplaceJSON, secrets and all.
func TestReplaceCompactJSON(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	keys := []string{"os", "kernel", "token", "Key", "note", "auth", "x"}
	named := func(kind, _ string, _ int) string { return FormatMask(kind, "0a1b") }
	for range 20000 {
		v := map[string]any{}
		for range rng.Intn(4) {
			var val any = genScanText(rng)
			switch rng.Intn(4) {
			case 0:
				val = []any{genScanText(rng), rng.Intn(100)}
			case 1:
				val = map[string]any{keys[rng.Intn(len(keys))]: genScanText(rng)}
			}
			v[keys[rng.Intn(len(keys))]+genScanText(rng)[:1]] = val
		}
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want, wantSecrets, werr := New("sekrit-value").ReplaceJSON(raw, named)
		got, gotSecrets, gerr := New("sekrit-value").ReplaceCompactJSON(raw, named)
		if string(got) != string(want) || !reflect.DeepEqual(gotSecrets, wantSecrets) || (werr == nil) != (gerr == nil) {
			t.Fatalf("%s:\n compact %s %v %v\n json    %s %v %v", raw, got, gotSecrets, gerr, want, wantSecrets, werr)
		}
	}
}

// lineStartKeySlow is lineStartKey as it read before: a rune at a time.
func lineStartKeySlow(s string, keyStart int) bool {
	// What may stand before the key is short: a word (export, readonly)
	// and four bytes more, white space aside. Past that many other bytes
	// the key does not begin its line, however long the line is.
	ls, other := keyStart, 0
	for ls > 0 && s[ls-1] != '\n' {
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

// TestLineStartAndKeywords: lineStartKey's ASCII path and isCodeKeyword
// decide as what they replace.
func TestLineStartAndKeywords(t *testing.T) {
	rng := rand.New(rand.NewSource(13))
	pieces := []string{" ", "\t", "\v", "\f", "\v\v\v\v", "\f\f\f\f", "\u00a0", "\u0085", "\u2003", "\n", "export", "set", "-", "#", "\"", "'", "{", "[",
		"x", "é", "readonly ", "--", "\\\"", "token", "nil", "None?", "lambda:", "Optional", "string::", "?"}
	for range 50000 {
		var b strings.Builder
		for range rng.Intn(16) {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		s := b.String()
		for k := 0; k <= len(s); k++ {
			if k < len(s) && !utf8.RuneStart(s[k]) {
				continue
			}
			if got, want := lineStartKey(s, k), lineStartKeySlow(s, k); got != want {
				t.Fatalf("lineStartKey(%q, %d) = %v, want %v", s, k, got, want)
			}
		}
		w := strings.TrimSpace(s)
		want := codeKeywords()[w] || codeKeywords()[strings.TrimSuffix(w, "?")] || codeKeywords()[strings.TrimRight(w, ":")]
		if got := isCodeKeyword(w); got != want {
			t.Fatalf("isCodeKeyword(%q) = %v, want %v", w, got, want)
		}
	}
}

// TestConcurrentScans: redactions running at once (each with candidate
// lists from the shared pool) give what each gives alone.
func TestConcurrentScans(t *testing.T) {
	rng := rand.New(rand.NewSource(21))
	texts := make([]string, 64)
	want := make([]string, len(texts))
	for i := range texts {
		for range 40 {
			texts[i] += genScanText(rng) + "\n"
		}
		want[i] = String(texts[i])
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 200 {
				i := (w*31 + k) % len(texts)
				if got := String(texts[i]); got != want[i] {
					t.Errorf("text %d redacted differently at once", i)
					return
				}
			}
		}()
	}
	wg.Wait()
}
