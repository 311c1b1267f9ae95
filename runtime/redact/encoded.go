package redact

import (
	"bytes"
	"math"
	"regexp/syntax"
	"strings"
	"sync"
	"unicode/utf8"
)

// Encoded text: a secret URL-encoded (a query, a form, a parameter the
// http tool repeats in its URL) or in base64 (`base64 .env`, a blob in a
// JSON document) keeps none of the shapes the rules know. Runs that may
// hold one are found with byte loops — the percent signs and plus signs
// by strings.IndexByte, the runs of base64's alphabets by a loop that
// skips much of the text (see appendBase64) — and decoded, and the
// decoded text is read by find again: the same rules, the literals, and
// the encodings once more (URL-encoded twice, base64 of URL-encoded text,
// URL-encoded base64), at most maxDecodes encodings deep. A run is decoded
// only where it can hold a secret: percent escapes decoding to at least
// minSecretLen bytes, base64 decoding to that much text (valid UTF-8, no
// control byte but tab, line feed and carriage return). What the decoded
// text holds is masked in the encoded text: a percent-encoded secret's
// own escapes (each decoded byte comes from one byte or one escape, so a
// span maps back exactly and the label around it stays:
// password%3D[REDACTED]%26user%3Dbob); a base64 run whole (its characters
// each carry bits of three bytes).

// maxDecodes bounds how many encodings are taken off a run, one inside
// another: the http tool URL-encodes a parameter that may already be
// URL-encoded base64.
const maxDecodes = 3

// minWrap is the shortest line of a wrapped base64 block (base64(1) and
// MIME write 76 characters a line, PEM and OpenSSL 64): a run goes on past
// a line break only after a line of at least that many characters, a
// multiple of four, as long as the block's other lines — not after the
// value of an .env line, a token of 40 characters.
const minWrap = 60

// minSecretLen is the fewest bytes of text in which a rule finds a secret:
// the shortest match of any rule, read off its expressions. No decoded
// text shorter than that is read.
var minSecretLen = sync.OnceValue(func() int {
	n := math.MaxInt
	for i := range rules {
		n = min(n, rules[i].minLen())
	}
	return n
})

// minLen is the fewest bytes a match of the rule holds.
func (r *rule) minLen() int {
	if r.least != nil {
		return r.least()
	}
	return regexpMinLen(r.re.String())
}

// regexpMinLen returns the fewest bytes a match of expr holds.
func regexpMinLen(expr string) int {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		panic("redact: " + err.Error())
	}
	return syntaxMinLen(re)
}

func syntaxMinLen(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, c := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				n++ // a letter folds to another, of one byte or more
				continue
			}
			n += utf8.RuneLen(c)
		}
		return n
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return syntaxMinLen(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min * syntaxMinLen(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, sub := range re.Sub {
			n += syntaxMinLen(sub)
		}
		return n
	case syntax.OpAlternate:
		n := math.MaxInt
		for _, sub := range re.Sub {
			n = min(n, syntaxMinLen(sub))
		}
		return n
	}
	return 0 // empty, anchors, boundaries, *, ?
}

// keyValueMinLen is the fewest bytes of a key-value pair the rules mask:
// the shortest keyword, then the shortest separator and value.
func keyValueMinLen() int {
	n := math.MaxInt
	for _, k := range keyValueKeywords {
		n = min(n, len(k.word))
	}
	return n + regexpMinLen(keyValueRest.String())
}

// minDecoded is the fewest decoded bytes r reads: minSecretLen, or the
// shortest literal when shorter.
func (r *Redactor) minDecoded() int {
	n := minSecretLen()
	if k := len(r.literals); k > 0 {
		n = min(n, len(r.literals[k-1])) // longest first
	}
	return n
}

// minBase64Run is the fewest base64 characters that hold n bytes.
func minBase64Run(n int) int { return (4*n + 2) / 3 }

// decoder reads the encoded runs of one text.
type decoder struct {
	r     *Redactor
	depth int    // encodings taken off to reach the text
	min   int    // r.minDecoded()
	buf   []byte // the decoded text of a run; allocated for the first run that may hold a secret
}

// appendEncoded appends what r finds in the encoded runs of s, depth
// encodings deep, to spans.
func (r *Redactor) appendEncoded(spans []span, s string, depth int) []span {
	d := decoder{r: r, depth: depth, min: max(r.minDecoded(), 1)}
	spans = d.appendPercent(spans, s)
	return d.appendBase64(spans, s)
}

// urlRun are the bytes of a URL-encoded run: the unreserved ones, the
// escapes, "+" (a space in a query or a form), the delimiters a URL keeps
// as they are, and "[" and "]" (a mask inside the run).
var urlRun = newByteSet("a-z", "A-Z", "0-9", "-._~%+!$&*,;=:@/?#[]")

// appendPercent reads the runs of s that hold a percent escape or a "+"
// (a space in a query or a form: the+token+is+Bearer+abc…). The next of
// each is looked for with strings.IndexByte, once for each run.
func (d *decoder) appendPercent(spans []span, s string) []span {
	lo := 0             // the end of the last run read
	pct, plus := -1, -1 // the next "%" and "+" at or after lo (len(s): none); -1: not looked for
	for lo < len(s) {
		if pct < lo {
			pct = indexFrom(s, lo, '%')
		}
		if plus < lo {
			plus = indexFrom(s, lo, '+')
		}
		p := min(pct, plus)
		if p == len(s) {
			break
		}
		if p == pct && (p+2 >= len(s) || !isHex(s[p+1]) || !isHex(s[p+2])) {
			pct = indexFrom(s, p+1, '%') // no escape
			continue
		}
		start := p
		for start > lo && urlRun[s[start-1]] {
			start--
		}
		end := runEnd(s, p, urlRun)
		spans = d.percentRun(spans, s, start, end)
		lo = end
	}
	return spans
}

// indexFrom returns the first index of c in s at or after i, len(s) if
// there is none.
func indexFrom(s string, i int, c byte) int {
	if j := strings.IndexByte(s[i:], c); j >= 0 {
		return i + j
	}
	return len(s)
}

// percentRun reads the run s[start:end] decoded: its escapes, and "+" as
// a space. Where that finds nothing and the run holds a "+" and an escape,
// it is read again with "+" as itself (a path keeps it), for base64 only:
// that reading is not text a rule should read (without an escape, it is
// the run as it is, read already).
func (d *decoder) percentRun(spans []span, s string, start, end int) []span {
	run := s[start:end]
	if len(run) < d.min {
		return spans
	}
	var small [128]byte // most runs (a diff's "+", i+1) decode here, and are dropped
	buf := percentDecode(small[:0], run, true)
	if len(buf) < d.min {
		return spans
	}
	var found []span
	if d.worthReading(buf) {
		found = d.r.findDepth(string(buf), d.depth+1)
	}
	if len(found) == 0 && d.depth+1 < maxDecodes && strings.IndexByte(run, '+') >= 0 && len(buf) < len(run) {
		buf = percentDecode(buf[:0], run, false)
		inner := decoder{r: d.r, depth: d.depth + 1, min: d.min}
		found = inner.appendBase64(nil, string(buf))
	}
	if len(found) == 0 {
		return spans
	}
	// Each decoded byte comes from a byte or an escape of the run, in
	// order: the spans' ends map back reading the run once.
	at, k := 0, 0 // at: a position in the run; k: the decoded bytes before it
	next := func(o int) int {
		for k < o {
			if run[at] == '%' && at+2 < len(run) && isHex(run[at+1]) && isHex(run[at+2]) {
				at += 3
			} else {
				at++
			}
			k++
		}
		return start + at
	}
	for _, sp := range found {
		a := next(sp.start)
		spans = append(spans, span{a, next(sp.end), sp.kind})
	}
	return spans
}

// percentDecode appends run to b with its escapes decoded, and "+" as a
// space with plus.
func percentDecode(b []byte, run string, plus bool) []byte {
	for i := 0; i < len(run); i++ {
		c := run[i]
		switch {
		case c == '%' && i+2 < len(run) && isHex(run[i+1]) && isHex(run[i+2]):
			c = unhex(run[i+1])<<4 | unhex(run[i+2])
			i += 2
		case c == '+' && plus:
			c = ' '
		}
		b = append(b, c)
	}
	return b
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// worthReading reports whether decoded text may hold what r finds: a
// rule's anchor, a literal (when it is as long as the shortest), or, when
// another encoding may be taken off, a percent sign or a run of base64.
func (d *decoder) worthReading(b []byte) bool {
	if n := len(d.r.literals); n > 0 && len(b) >= len(d.r.literals[n-1]) || rulesScanner().has(b) {
		return true
	}
	if d.depth+1 >= maxDecodes {
		return false
	}
	if bytes.IndexByte(b, '%') >= 0 {
		return true
	}
	m, n := minBase64Run(d.min), 0
	for _, c := range b {
		if n++; b64Value[c] == noB64 {
			n = 0
		} else if n >= m {
			return true
		}
	}
	return false
}

// noB64 marks a byte that is not in base64's alphabets.
const noB64 = 0xff

// b64Value is the value of each byte of base64's standard and URL-safe
// alphabets ("+" and "-" are 62, "/" and "_" 63), noB64 for the others.
var b64Value = func() (t [256]byte) {
	for i := range t {
		t[i] = noB64
	}
	const std = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range len(std) {
		t[std[i]] = byte(i)
	}
	t['-'], t['_'] = 62, 63
	return t
}()

// b64In: the bytes of base64's alphabets.
var b64In = func() (t [256]bool) {
	for c := range t {
		t[c] = b64Value[c] != noB64
	}
	return t
}()

// appendBase64 reads the runs of base64's alphabets in s at least
// m = minBase64Run(d.min) characters long. It looks for them as a string
// search looks for a word, from the end of a window of m bytes that
// starts where a run may, backwards: a byte out of the alphabets moves
// the window past it, and most windows of prose and code hold one near
// their end; a window all in the alphabets begins a run.
func (d *decoder) appendBase64(spans []span, s string) []span {
	m := minBase64Run(d.min)
	// s[lo-1] is in no run (out of the alphabets, or the end of the last
	// run read); s[lo:known] is in the alphabets.
	lo, known := 0, 0
	in := &b64In
	for i := m - 1; i < len(s); i = lo + m - 1 {
		j := i
		for j >= known && in[s[j]] {
			j--
		}
		if j >= known {
			lo, known = j+1, i+1
			continue
		}
		end := i + 1
		for end < len(s) && in[s[end]] {
			end++
		}
		cut := 0
		if end < len(s) && runGoesOn[s[end]] {
			end, cut = base64RunEnd(s, lo, end)
		}
		// Most runs are names and words whose first four characters
		// decode to no text (textStart, written out: this is done for
		// every run); only a run that may be read from elsewhere (after a
		// "/" with m characters after it, a line break) is read on.
		if end-lo >= 4 && cut == 0 {
			v := uint32(b64Value[s[lo]])<<18 | uint32(b64Value[s[lo+1]])<<12 | uint32(b64Value[s[lo+2]])<<6 | uint32(b64Value[s[lo+3]])
			b0, b1, b2 := byte(v>>16), byte(v>>8), byte(v)
			text := b0|b1|b2 < 0x80 && textByte[b0] && textByte[b1] && textByte[b2] || b0|b1|b2 >= 0x80 && utf8TextStart(b0, b1, b2)
			if !text && !hasSlash(s[lo:max(end-m, lo)]) {
				lo, known = end, end
				continue
			}
		}
		spans = d.base64Run(spans, s, lo, end, cut)
		lo, known = end, end
	}
	return spans
}

// hasSlash reports whether s holds a "/": by hand when s is short (most
// runs are), where a call costs more than the loop.
func hasSlash(s string) bool {
	if len(s) > 16 {
		return strings.IndexByte(s, '/') >= 0
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return true
		}
	}
	return false
}

// runGoesOn: the bytes after which a run of base64 may go on (padding, a
// line break): see base64RunEnd.
var runGoesOn = newByteSet("=\r\n\\")

// base64RunEnd returns the end of the run of base64 that starts at start,
// its characters read up to e: up to two "=" of padding after them, and,
// in a block wrapped into lines (of at least minWrap characters, of the
// same length, a multiple of four), the next lines after a line break
// ("\n", "\r\n", or either escaped as in a JSON string). Over several
// lines, cut is where the line before the last one ends (the last line
// may be other text: a word after the block), 0 otherwise.
func base64RunEnd(s string, start, e int) (end, cut int) {
	lineStart, width := start, 0
	for {
		p := e
		for p < len(s) && p-e < 2 && s[p] == '=' {
			p++
		}
		if p > e {
			return p, cut
		}
		// A line of a block holds a multiple of four characters, as many
		// as the block's first line — which may begin with a path's names
		// (a "/"): then the second line says how many.
		w := e - lineStart
		if w < minWrap {
			return e, cut
		}
		path := lineStart == start && strings.IndexByte(s[start:e], '/') >= 0
		if !path && (w%4 != 0 || width > 0 && w != width) {
			return e, cut
		}
		n := lineBreak(s, e)
		if n == 0 || e+n >= len(s) || b64Value[s[e+n]] == noB64 {
			return e, cut
		}
		if !path {
			width = w
		}
		cut, lineStart, e = e, e+n, e+n
		for e < len(s) && b64Value[s[e]] != noB64 {
			e++
		}
	}
}

// lineBreak returns the length of the line break at s[i:] ("\n", "\r\n",
// `\n`, `\r\n`), 0 if there is none.
func lineBreak(s string, i int) int {
	if i == len(s) {
		return 0
	}
	switch s[i] {
	case '\n':
		return 1
	case '\r', '\\':
		for _, br := range [...]string{"\r\n", `\n`, `\r\n`} {
			if strings.HasPrefix(s[i:], br) {
				return len(br)
			}
		}
	}
	return 0
}

// base64Run reads the run s[start:end] — over several lines when cut > 0,
// and then, if that finds nothing, s[start:cut] without its last line —
// and appends the span to mask if it holds a secret.
func (d *decoder) base64Run(spans []span, s string, start, end, cut int) []span {
	sp, ok := d.base64Secret(s, start, end, cut > 0)
	if !ok && cut > 0 {
		sp, ok = d.base64Secret(s, start, cut, true)
	}
	if ok {
		spans = append(spans, sp)
	}
	return spans
}

// base64Secret reads the run s[start:end] (wrapped: over several lines):
// decoded from its start, or from after a "/" or a line break in it (the
// run may begin with a path's names, /tmp/ZGJf…, or a line that is not
// the block's), where the decoded bytes are text at least d.min bytes
// long. A secret found masks the run, from where it was decoded to its
// end. Most runs are names and words whose first four characters decode
// to no text (textStart): they cost a few lookups.
func (d *decoder) base64Secret(s string, start, end int, wrapped bool) (span, bool) {
	m := minBase64Run(d.min) // fewer characters hold too few bytes
	for from := start; end-from >= m; {
		reached := from
		if (end-from < 4 || textStart(s, from)) && isBase64Text(s, from, end, d.min) {
			d.buf, reached = decodeBase64Text(d.buf[:0], s, from, end)
			if len(d.buf) >= d.min && d.worthReading(d.buf) {
				if found := d.r.findDepth(string(d.buf), d.depth+1); len(found) > 0 {
					return span{from, end, found[0].kind}, true
				}
			}
		}
		from = nextBase64Start(s, max(reached, from+1), end, wrapped)
	}
	return span{}, false
}

// nextBase64Start returns where, in s[from:end], a run may start again:
// after a "/" or, in a wrapped run, a line break; end if nowhere.
func nextBase64Start(s string, from, end int, wrapped bool) int {
	if !wrapped {
		if j := strings.IndexByte(s[from:end], '/'); j >= 0 {
			return from + j + 1
		}
		return end
	}
	for i := from; i < end; i++ {
		switch s[i] {
		case '/', '\n':
			return i + 1
		case '\\':
			return i + 2 // after an escaped line break's first escape (decoding skips the others)
		}
	}
	return end
}

// textByte: a byte that text holds (printable ASCII, tab, line feed,
// carriage return, and bytes of UTF-8 sequences, checked as such).
var textByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	t['\t'], t['\n'], t['\r'] = true, true, true
	for c := 0x80; c < 0x100; c++ {
		t[c] = true
	}
	return t
}()

// base64Group decodes the group of base64 at s[i:end] (line breaks and
// padding skipped): its bytes, how many (0 when no group is left), and
// where it ends. A last group of two or three characters holds one or two
// bytes.
func base64Group(s string, i, end int) (g [3]byte, n, next int) {
	var q [4]byte
	k := 0
	for i < end && k < 4 {
		switch c := s[i]; {
		case c == '\\':
			i += 2 // an escaped line break
		case c == '\r' || c == '\n' || c == '=':
			i++
		default:
			q[k] = b64Value[c]
			k++
			i++
		}
	}
	if k < 2 {
		return g, 0, i
	}
	v := uint32(q[0])<<18 | uint32(q[1])<<12 | uint32(q[2])<<6 | uint32(q[3])
	return [3]byte{byte(v >> 16), byte(v >> 8), byte(v)}, k - 1, i
}

// textStart reports whether the four characters at s[i:], in base64's
// alphabets, decode to three bytes that may begin text (see
// decodeBase64Text).
func textStart(s string, i int) bool {
	v := uint32(b64Value[s[i]])<<18 | uint32(b64Value[s[i+1]])<<12 | uint32(b64Value[s[i+2]])<<6 | uint32(b64Value[s[i+3]])
	b0, b1, b2 := byte(v>>16), byte(v>>8), byte(v)
	if b0|b1|b2 < 0x80 { // ASCII, most of what decodes to text
		return textByte[b0] && textByte[b1] && textByte[b2]
	}
	return utf8TextStart(b0, b1, b2)
}

// utf8TextStart is textStart for three bytes that are not all ASCII.
func utf8TextStart(b0, b1, b2 byte) bool {
	cont := 0
	for _, c := range [3]byte{b0, b1, b2} {
		if !textByte[c] || !utf8Next(&cont, c) {
			return false
		}
	}
	return true
}

// isBase64Text reports whether s[from:end] decodes to at least need bytes
// that are text (see decodeBase64Text), reading no further. It keeps
// nothing: most runs of base64's alphabet (words, names, hashes) fail
// within a group or two.
func isBase64Text(s string, from, end, need int) bool {
	cont, n := 0, 0
	for i := from; n < need; {
		g, k, next := base64Group(s, i, end)
		if k == 0 {
			return false
		}
		for _, c := range g[:k] {
			if !textByte[c] || !utf8Next(&cont, c) {
				return false
			}
		}
		i, n = next, n+k
	}
	return true
}

// decodeBase64Text appends to b the bytes s[from:end] (base64, its line
// breaks skipped) decodes to, group by group, while they are text: it
// stops before the first group that holds a byte text does not (a
// control byte, invalid UTF-8), and drops a UTF-8 sequence cut at the
// end. It returns the bytes and where in s the last group it kept ends.
func decodeBase64Text(b []byte, s string, from, end int) ([]byte, int) {
	reached := from
	cont := 0     // continuation bytes the current UTF-8 sequence still needs
	complete := 0 // len(b) at the end of the last complete character
	for i := from; ; {
		g, k, next := base64Group(s, i, end)
		if k == 0 {
			break
		}
		for _, c := range g[:k] {
			if !textByte[c] || !utf8Next(&cont, c) {
				return b[:complete], reached
			}
			if b = append(b, c); cont == 0 {
				complete = len(b)
			}
		}
		i, reached = next, next
	}
	return b[:complete], reached
}

// utf8Next reads byte c of UTF-8 text, cont the continuation bytes the
// current sequence still needs; it reports whether c may come there.
func utf8Next(cont *int, c byte) bool {
	switch {
	case c < 0x80:
		return *cont == 0
	case c < 0xc0:
		if *cont == 0 {
			return false
		}
		*cont--
		return true
	case *cont > 0:
		return false
	case c >= 0xc2 && c < 0xe0:
		*cont = 1
	case c >= 0xe0 && c < 0xf0:
		*cont = 2
	case c >= 0xf0 && c < 0xf5:
		*cont = 3
	default:
		return false
	}
	return true
}
