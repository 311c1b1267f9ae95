// Package redact finds secrets in text and JSON and replaces them: with
// "[REDACTED]" before anything is written (the database, logs, artifacts,
// approval prompts), or, through Replace and ReplaceJSON, with a mask the
// caller chooses for each secret — the gate's "[REDACTED:kind:id]", whose
// id its run's vault keeps with the original (see FormatMask, FindMasks).
//
// Where a secret has a visible label, the label stays:
// "password=[REDACTED]", "Authorization: Bearer [REDACTED]",
// "postgres://app:[REDACTED]@db/prod". Masks already in a text are left as
// they are, and redaction repeats until a pass finds nothing more, so
// redacting a result again changes nothing.
//
// # What is found
//
//   - known token formats, wherever they appear: PEM private key blocks,
//     passwords in URLs, OpenAI, Anthropic, AWS, GitHub, GitLab, Slack,
//     Stripe, Google, Hugging Face and npm keys and tokens, JWTs;
//   - Authorization and Cookie header values written as headers, Bearer
//     tokens with a digit, Basic credentials, curl -u passwords;
//   - the value after a key ending in password, passwd, passphrase, pwd,
//     secret, token, api_key, access_key, secret_key, private_key or
//     credential(s) — when the value is a literal, not code: a quoted
//     literal (not a format string, a variable, a placeholder, or in code
//     prose, a path or a name); a bare value where configuration is
//     written (KEY=value, "key":value, YAML and INI lines), or one that
//     looks random. A name, a selector, a call, a type, a keyword, the
//     key's own name or a name that itself names a secret is code, and an
//     argument's value ends with its call: cookie := range, apiKey:
//     cfg.APIKey, const envMCPToken = "WARDEN_MCP_TOKEN", pwd=None),
//     cache_token = current_token, token == "lambda" are left alone;
//   - the literals given to New (the secrets in the environment), every
//     occurrence;
//   - all of these in encoded text: runs of percent escapes (URL-encoded
//     once or more) and runs of base64 that decode to text are decoded
//     and read again, up to three encodings deep; a secret found masks
//     its own escapes, or the whole base64 run (see appendEncoded).
//
// docs/redaction.md has the rules with examples of what is and is not
// masked.
//
// Redaction is linear in the input's size, whatever the input: the
// patterns are located by their literal anchors (sk-, ghp_, eyJ,
// password, …), all of them in one pass over the text, and each candidate
// is checked with an RE2 regular expression anchored there and bounded by
// its line (or by hand, where the expression's first reading decides), and
// runs that a failed check has read are not read again. Encoded runs are
// found by byte loops, and each decoded text, no longer than its run, is
// read once at each of at most three depths.
package redact

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Mask replaces every secret in what String, Bytes and JSON return.
const Mask = "[REDACTED]"

// minLiteral is the shortest literal a Redactor masks; shorter values
// would mask ordinary words.
const minLiteral = 8

// maxLiteralPasses bounds the passes that remove literals re-formed across
// a mask (which only a literal that begins or ends like a mask can do).
const maxLiteralPasses = 8

// literalKind is the kind of the literal secrets given to New.
const literalKind = "env-secret"

// Redactor finds the built-in patterns and a set of literal secrets. A nil
// *Redactor finds the patterns only. It is safe for concurrent use.
type Redactor struct {
	literals []string // distinct, longest first
	// kinds are the kinds of the literals given by WithSecrets; the others
	// are env-secret.
	kinds map[string]string
}

// New returns a Redactor that also masks every occurrence of each literal
// (for example the value of OPENAI_API_KEY), as kind env-secret. Literals
// shorter than 8 bytes are ignored, as are those that are part of the mask
// itself ("REDACTED]"), which could never be removed.
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

// WithLiterals returns a Redactor like r that also masks each literal at
// least minLen bytes long (the originals a call's arguments brought back,
// wherever its outcome repeats them).
func (r *Redactor) WithLiterals(minLen int, literals ...string) *Redactor {
	if r == nil {
		r = plain
	}
	secrets := make([]Secret, len(literals))
	for i, l := range literals {
		secrets[i] = Secret{Kind: literalKind, Original: l}
	}
	return r.WithSecrets(minLen, secrets...)
}

// WithSecrets returns a Redactor like r that also masks the original of
// each secret at least minLen bytes long wherever it appears — as it is,
// or quoted as Go (%q) or JSON quote it — as the secret's kind (the
// secrets found in a call's arguments, wherever its record and outcome
// repeat them in a form the patterns do not know: a path cleaned of a
// URL's "//" in a capability, an error quoting an argument whose escapes
// the quote escaped again). An original that is part of a mask's text
// ("RED", "url") is masked where it stands alone, never inside a mask.
func (r *Redactor) WithSecrets(minLen int, secrets ...Secret) *Redactor {
	if r == nil {
		r = plain
	}
	if !slices.ContainsFunc(secrets, func(sc Secret) bool { return len(sc.Original) >= minLen }) {
		return r // nothing to add: r masks the same (a Redactor is never changed)
	}
	out := &Redactor{literals: append([]string(nil), r.literals...), kinds: r.kinds}
	seen := map[string]bool{}
	for _, l := range out.literals {
		seen[l] = true
	}
	cloned := false // out.kinds is out's own
	for _, sc := range secrets {
		if len(sc.Original) < minLen {
			continue
		}
		for _, l := range quotedForms(sc.Original) {
			if seen[l] || strings.Contains(l, maskPrefix) {
				continue
			}
			seen[l] = true
			out.literals = append(out.literals, l)
			if sc.Kind != "" && sc.Kind != literalKind {
				if !cloned {
					out.kinds, cloned = maps.Clone(r.kinds), true
					if out.kinds == nil {
						out.kinds = map[string]string{}
					}
				}
				out.kinds[l] = sc.Kind
			}
		}
	}
	sort.SliceStable(out.literals, func(i, j int) bool { return len(out.literals[i]) > len(out.literals[j]) })
	return out
}

// IsPassword reports whether kind is what the patterns call a password:
// a URL's user info (url-password), the value of a password=, passwd=,
// passphrase= or pwd= pair, a curl -u password. Such a value is a
// password whatever its length; a short value of another kind may be an
// ordinary word.
func IsPassword(kind string) bool { return kind == "url-password" || kind == "password" }

// quotedForms returns s, and s as Go's %q and JSON write it inside their
// quotes when that differs.
func quotedForms(s string) []string {
	forms := []string{s}
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		forms = append(forms, q[1:len(q)-1])
	}
	if j, err := json.Marshal(s); err == nil && string(j[1:len(j)-1]) != s && !slices.Contains(forms, string(j[1:len(j)-1])) {
		forms = append(forms, string(j[1:len(j)-1]))
	}
	return forms
}

// kindOf returns the kind of a literal.
func (r *Redactor) kindOf(l string) string {
	if k, ok := r.kinds[l]; ok {
		return k
	}
	return literalKind
}

var plain = &Redactor{}

// String redacts every secret pattern in s.
func String(s string) string { return plain.String(s) }

// Bytes redacts every secret pattern in b; the result is a new slice.
func Bytes(b []byte) []byte { return plain.Bytes(b) }

// JSON redacts a JSON document; see (*Redactor).JSON.
func JSON(raw []byte) ([]byte, error) { return plain.JSON(raw) }

// Contains reports whether String(s) would change s.
func Contains(s string) bool { return plain.Contains(s) }

// Cut returns the longest prefix of s at most n bytes long that ends
// neither inside a secret the patterns find in s (in its encoded runs too:
// before a base64 run holding one) nor inside a UTF-8 sequence: where a
// secret would be cut, s is cut before it. Text quoted in a message and
// cut short keeps no part of a secret that redaction, seeing only that
// part, could no longer know (ghp_AbCdEfGh… is no token).
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n < 0 {
		n = 0
	}
	for _, sp := range plain.find(s) {
		if sp.start >= n {
			break
		}
		if sp.end > n {
			n = sp.start
			break
		}
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Secret is one secret [Redactor.Replace] replaced.
type Secret struct {
	Kind     string // what it is: aws-access-key, password, private-key, …
	Original string // the text replaced
	Mask     string // the text that replaced it
	// Line is the 1-based line of the result on which the mask starts;
	// 0 for a secret in JSON.
	Line int
}

// MaskFunc returns the text that replaces a secret of kind found at byte
// offset at of the text (-1 in JSON). It must return a mask of one of the
// forms FindMasks or String recognise, so that redacting the result again
// changes nothing.
type MaskFunc func(kind, original string, at int) string

func plainMask(string, string, int) string { return Mask }

// String redacts the literals and every secret pattern in s.
func (r *Redactor) String(s string) string {
	out, _ := r.Replace(s, plainMask)
	return out
}

// Bytes is String for byte slices; the result is a new slice (nil for nil).
func (r *Redactor) Bytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return []byte(r.String(string(b)))
}

// Contains reports whether r.String(s) would change s.
func (r *Redactor) Contains(s string) bool {
	if r == nil {
		r = plain
	}
	return len(r.find(s)) > 0
}

// Replace replaces every secret in s by what mask returns for it and
// returns the result and the secrets, in order. Masks already in s are left
// as they are. The result has nothing left to find — no literal re-formed
// across a mask, no pattern that a mask made visible (a token glued to
// another that its mask set free): the spans grow until a pass over the
// result finds nothing (past maxLiteralPasses, the whole text is one
// secret). Redacting the result again changes nothing.
func (r *Redactor) Replace(s string, mask MaskFunc) (string, []Secret) {
	if r == nil {
		r = plain
	}
	spans := r.find(s)
	if len(spans) == 0 {
		return s, nil
	}
	for pass := 0; ; pass++ {
		out, secrets, pieces := build(s, spans, mask)
		if !r.mayFindMore(out, pieces) {
			return out, secrets
		}
		again := r.findNear(out, pieces)
		if len(again) == 0 {
			return out, secrets
		}
		if pass == maxLiteralPasses {
			out, secrets, _ = build(s, []span{{0, len(s), literalKind}}, mask)
			return out, secrets
		}
		for _, sp := range again {
			spans = append(spans, span{inputOffset(pieces, sp.start, false), inputOffset(pieces, sp.end-1, true), sp.kind})
		}
		spans = mergeSpans(spans)
	}
}

// glue are the bytes that join a mask to the text beside it into one run
// (a token, a name, a key).
var glue = newByteSet("a-z", "A-Z", "0-9", "_.-+/=")

// mayFindMore reports whether a pass over a result could find what the
// pass that made it did not: only where a mask is glued to the text beside
// it (a token that began right after a masked one is free now; a run cut
// by a mask is read anew), or where a literal re-formed across a mask.
func (r *Redactor) mayFindMore(out string, pieces []piece) bool {
	for i, p := range pieces {
		if !p.masked {
			continue
		}
		end := len(out)
		if i+1 < len(pieces) {
			end = pieces[i+1].out
		}
		if p.out > 0 && glue[out[p.out-1]] && out[p.out-1] != '=' || end < len(out) && glue[out[end]] {
			return true
		}
	}
	return len(r.literals) > 0 && len(r.literalSpans(out)) > 0
}

// findNear is find over the lines of a result that hold a mask made by
// build (and, for the literals, their length around it): every rule but
// the private key's reads one line, and masking changes nothing elsewhere.
// Many windows are read as one (each find has a fixed cost).
func (r *Redactor) findNear(out string, pieces []piece) []span {
	reach := 0
	for _, l := range r.literals {
		reach = max(reach, len(l))
	}
	var wins [][2]int
	// The pieces come in order: the line starts and ends are found reading
	// on from the last ones, so that a long line with many masks is read
	// once, not once a mask.
	seen, lineStart, le := 0, 0, -1
	for i, p := range pieces {
		if !p.masked {
			continue
		}
		end := len(out)
		if i+1 < len(pieces) {
			end = pieces[i+1].out
		}
		x := max(p.out-reach, 0)
		if x < seen {
			seen, lineStart = 0, 0
		}
		if j := strings.LastIndexByte(out[seen:x], '\n'); j >= 0 {
			lineStart = seen + j + 1
		}
		seen = x
		a := lineStart
		y := min(end+reach, len(out))
		if y > le {
			le = lineEnd(out, y)
		}
		b := le
		if n := len(wins); n > 0 && a <= wins[n-1][1] {
			wins[n-1][1] = max(wins[n-1][1], b)
			continue
		}
		wins = append(wins, [2]int{a, b})
	}
	if len(wins) == 1 {
		var found []span
		for _, sp := range r.find(out[wins[0][0]:wins[0][1]]) {
			found = append(found, span{sp.start + wins[0][0], sp.end + wins[0][0], sp.kind})
		}
		return found
	}
	// The windows are read as one text, a line break between each: a
	// find has a fixed cost, and no rule's match crosses a line break that
	// it did not cross in the result (a span that does is dropped).
	var b strings.Builder
	base := make([]int, len(wins)) // where each window starts in the joined text
	for i, w := range wins {
		if i > 0 {
			b.WriteByte('\n')
		}
		base[i] = b.Len()
		b.WriteString(out[w[0]:w[1]])
	}
	var found []span
	for _, sp := range r.find(b.String()) {
		i := sort.SearchInts(base, sp.start+1) - 1
		if sp.end > base[i]+wins[i][1]-wins[i][0] {
			continue
		}
		d := wins[i][0] - base[i]
		found = append(found, span{sp.start + d, sp.end + d, sp.kind})
	}
	return found
}

// piece maps a part of a result to the part of the input it came from.
type piece struct {
	out, in, inEnd int // start in the result; span in the input
	masked         bool
}

// build replaces spans (sorted, not overlapping) of s by masks.
func build(s string, spans []span, mask MaskFunc) (string, []Secret, []piece) {
	var b strings.Builder
	b.Grow(len(s) + 16*len(spans))
	secrets := make([]Secret, 0, len(spans))
	pieces := make([]piece, 0, 2*len(spans)+1)
	last, line, counted := 0, 1, 0
	for _, sp := range spans {
		if sp.start > last {
			pieces = append(pieces, piece{out: b.Len(), in: last, inEnd: sp.start})
			b.WriteString(s[last:sp.start])
		}
		original := s[sp.start:sp.end]
		m := mask(sp.kind, original, sp.start)
		line += strings.Count(s[counted:sp.start], "\n")
		pieces = append(pieces, piece{out: b.Len(), in: sp.start, inEnd: sp.end, masked: true})
		b.WriteString(m)
		secrets = append(secrets, Secret{Kind: sp.kind, Original: original, Mask: m, Line: line})
		counted = sp.end // the original's own lines are not in the result
		last = sp.end
	}
	if last < len(s) {
		pieces = append(pieces, piece{out: b.Len(), in: last, inEnd: len(s)})
		b.WriteString(s[last:])
	}
	return b.String(), secrets, pieces
}

// inputOffset maps byte o of a result back to the input: into a mask, to
// the start (or, with end, the end) of what it replaced.
func inputOffset(pieces []piece, o int, end bool) int {
	i := sort.Search(len(pieces), func(i int) bool { return pieces[i].out > o }) - 1
	p := pieces[max(i, 0)]
	switch {
	case p.masked && end:
		return p.inEnd
	case p.masked:
		return p.in
	case end:
		return p.in + (o - p.out) + 1
	}
	return p.in + (o - p.out)
}

// find returns the spans to mask in s: what the literals and the rules
// find, outside the masks s already holds, merged — in s and in its
// encoded runs. The rules read the text with the literals masked (as the
// result will read), so that a second pass over the result finds nothing
// new.
func (r *Redactor) find(s string) []span { return r.findDepth(s, 0) }

// findDepth is find for a text depth encodings deep in the one find was
// given (see appendEncoded).
func (r *Redactor) findDepth(s string, depth int) []span {
	lits := r.literalSpans(s)
	if len(lits) == 0 {
		return wholeRunes(s, r.ruleSpans(s, depth))
	}
	t, _, pieces := build(s, lits, plainMask)
	for _, sp := range r.ruleSpans(t, depth) {
		lits = append(lits, span{inputOffset(pieces, sp.start, false), inputOffset(pieces, sp.end-1, true), sp.kind})
	}
	return wholeRunes(s, mergeSpans(lits))
}

// wholeRunes widens spans (merged) so that none splits a UTF-8 sequence:
// a mask never leaves half a character behind.
func wholeRunes(s string, spans []span) []span {
	changed := false
	for i := range spans {
		for n := 0; n < utf8.UTFMax-1 && spans[i].start > 0 && !utf8.RuneStart(s[spans[i].start]); n++ {
			spans[i].start--
			changed = true
		}
		for n := 0; n < utf8.UTFMax-1 && spans[i].end < len(s) && !utf8.RuneStart(s[spans[i].end]); n++ {
			spans[i].end++
			changed = true
		}
	}
	if changed {
		return mergeSpans(spans)
	}
	return spans
}

// ruleSpans returns what the rules find in s outside its masks, merged:
// in s as it is and, fewer than maxDecodes encodings deep, in its encoded
// runs (where r's literals are looked for too).
func (r *Redactor) ruleSpans(s string, depth int) []span {
	spans := findPatterns(s)
	if depth < maxDecodes {
		spans = r.appendEncoded(spans, s, depth)
	}
	if len(spans) == 0 {
		return nil
	}
	if masks := existingMasks(s); len(masks) > 0 {
		spans = outsideMasks(spans, masks)
	}
	return mergeSpans(spans)
}

// outsideMasks drops the spans that start inside a mask and stretches
// those that end inside one over all of it. masks are in order.
func outsideMasks(spans []span, masks [][2]int) []span {
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	out := spans[:0]
	j := 0 // the first mask that ends after the current span's start
	for _, sp := range spans {
		for j < len(masks) && masks[j][1] <= sp.start {
			j++
		}
		if j < len(masks) && masks[j][0] <= sp.start {
			continue // starts inside a mask
		}
		for k := j; k < len(masks) && masks[k][0] < sp.end; k++ {
			if sp.end < masks[k][1] {
				sp.end = masks[k][1]
			}
		}
		out = append(out, sp)
	}
	return out
}

// literalSpans returns the merged spans of all occurrences (overlapping
// ones included) of every literal in s. An occurrence wholly inside a mask
// already in s is the mask's own text (a short password that is also a
// kind's name or an id's digits: "url", "a0"), not the secret: it is left,
// as masks are. A span that overlaps a mask takes in the whole mask, so
// that a literal re-formed across a mask leaves one mask, not a torn one.
func (r *Redactor) literalSpans(s string) []span {
	var spans []span
	for _, l := range r.literals {
		spans = appendOccurrences(spans, s, l, r.kindOf(l))
	}
	if len(spans) == 0 {
		return nil
	}
	masks := existingMasks(s) // in order, never overlapping
	if len(masks) > 0 {
		spans = slices.DeleteFunc(spans, func(sp span) bool { return insideMask(masks, sp) })
		if len(spans) == 0 {
			return nil
		}
	}
	spans = mergeSpans(spans)
	j := 0
	for i := range spans {
		for j < len(masks) && masks[j][1] <= spans[i].start {
			j++
		}
		for k := j; k < len(masks) && masks[k][0] < spans[i].end; k++ {
			spans[i].start = min(spans[i].start, masks[k][0])
			spans[i].end = max(spans[i].end, masks[k][1])
		}
	}
	return mergeSpans(spans)
}

// insideMask reports whether sp lies wholly inside one of masks (in
// order, never overlapping).
func insideMask(masks [][2]int, sp span) bool {
	i := sort.Search(len(masks), func(i int) bool { return masks[i][1] >= sp.end })
	return i < len(masks) && masks[i][0] <= sp.start
}

// appendOccurrences appends the spans of every occurrence of sub in s,
// overlapping ones included.
func appendOccurrences(spans []span, s, sub, kind string) []span {
	for i := 0; i+len(sub) <= len(s); {
		j := strings.Index(s[i:], sub)
		if j < 0 {
			break
		}
		spans = append(spans, span{i + j, i + j + len(sub), kind})
		i += j + 1
	}
	return spans
}
