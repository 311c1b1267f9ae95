package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// maxDepth bounds the nesting JSON accepts, as encoding/json does.
const maxDepth = 10000

// JSON redacts a JSON document. The value of every member whose key is
// sensitive (see below) is replaced whole by the string Mask, whatever its
// type (object, array, number, null); every other string — values and
// object keys alike, since maps keyed by tokens exist — is redacted like
// String; a number that holds a literal secret becomes the string Mask.
// The output is compact, valid JSON with members in their original order
// (duplicate keys kept; redacting keys can make two keys equal). Invalid
// JSON, trailing data and nesting deeper than 10000 are errors.
//
// A key is sensitive when, split into words (snake_case, kebab-case,
// camelCase, dotted), one word contains password, passwd or passphrase;
// or its last word ends in token, secret(s), apikey, privatekey, accesskey,
// secretkey, authorization, cookie(s), credential(s), session or
// sessionid or sessid, or is auth; or its last two words are api key, private key,
// access key, secret key or session id. So password, db_password,
// passwordHash, access_token, csrfToken, client_secret, apiKey, X-Api-Key,
// aws_secret_access_key, Authorization, Set-Cookie, credentials, auth and
// session_id are sensitive; max_tokens, prompt_tokens, token_type,
// tokenizer, secretName, key, public_key and aws_access_key_id are not.
func (r *Redactor) JSON(raw []byte) ([]byte, error) {
	out, _, err := r.ReplaceJSON(raw, plainMask)
	return out, err
}

// ReplaceJSON is JSON with the masks mask returns (at is -1), and the
// secrets replaced (Line 0). The whole value of a sensitive member is one
// secret: its original is the string's text, or the value's JSON for
// another type; its kind comes from the key (password, token, secret,
// api-key, authorization, cookie, credential, session, …).
func (r *Redactor) ReplaceJSON(raw []byte, mask MaskFunc) ([]byte, []Secret, error) {
	if r == nil {
		r = plain
	}
	if out, ok := r.jsonFast(raw); ok {
		return out, nil, nil
	}
	w := &jsonRewriter{r: r, mask: mask, raw: raw, dec: json.NewDecoder(bytes.NewReader(raw))}
	w.dec.UseNumber()
	w.out.Grow(len(raw))
	for {
		tok, err := w.dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("redact: %w", err)
		}
		if err := w.token(tok); err != nil {
			return nil, nil, err
		}
	}
	if !w.started {
		return nil, nil, errors.New("redact: invalid JSON: empty input")
	}
	if len(w.stack) > 0 {
		return nil, nil, fmt.Errorf("redact: invalid JSON: %w", io.ErrUnexpectedEOF)
	}
	return w.out.Bytes(), w.secrets, nil
}

// jsonFrame is an object or array ReplaceJSON is inside of.
type jsonFrame struct {
	obj       bool
	n         int  // members or elements written
	wantValue bool // in an object: the next token is a member's value
}

// jsonRewriter is ReplaceJSON's state as it rewrites one document.
type jsonRewriter struct {
	r       *Redactor
	mask    MaskFunc
	raw     []byte
	dec     *json.Decoder
	out     bytes.Buffer
	stack   []jsonFrame
	started bool
	secrets []Secret
}

// inJSON is the mask for a secret in a JSON string: w.mask's, at -1.
func (w *jsonRewriter) inJSON(kind, original string, _ int) string {
	return w.mask(kind, original, -1)
}

// replace redacts s like String, collecting the secrets found (Line 0).
func (w *jsonRewriter) replace(s string) string {
	out, found := w.r.Replace(s, w.inJSON)
	for i := range found {
		found[i].Line = 0
	}
	w.secrets = append(w.secrets, found...)
	return out
}

// valueDone counts a value written into the enclosing object or array.
func (w *jsonRewriter) valueDone() {
	if len(w.stack) > 0 {
		top := &w.stack[len(w.stack)-1]
		top.n++
		top.wantValue = false
	}
}

// token writes one token of the document.
func (w *jsonRewriter) token(tok json.Token) error {
	if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
		w.stack = w.stack[:len(w.stack)-1]
		w.out.WriteByte(byte(d))
		w.valueDone()
		return nil
	}
	if len(w.stack) == 0 {
		if w.started {
			return errors.New("redact: invalid JSON: data after the top-level value")
		}
		w.started = true
	} else if done, err := w.member(tok); done || err != nil {
		return err
	}
	return w.value(tok)
}

// member writes the comma before an element or member and, when tok is
// an object's key, the key, reporting that tok is done with; the whole
// value of a sensitive member is masked here.
func (w *jsonRewriter) member(tok json.Token) (bool, error) {
	top := &w.stack[len(w.stack)-1]
	if top.n > 0 && !top.wantValue {
		w.out.WriteByte(',')
	}
	if !top.obj || top.wantValue {
		return false, nil
	}
	key, _ := tok.(string)
	writeJSONString(&w.out, w.replace(key))
	w.out.WriteByte(':')
	if kind := sensitiveKeyKind(key); kind != "" {
		from := w.dec.InputOffset()
		v, err := captureValue(w.dec, w.raw, from)
		if err != nil {
			return true, fmt.Errorf("redact: %w", err)
		}
		if isMask(v) {
			writeJSONString(&w.out, v) // masked already
		} else {
			m := w.mask(kind, v, -1)
			writeJSONString(&w.out, m)
			w.secrets = append(w.secrets, Secret{Kind: kind, Original: v, Mask: m})
		}
		w.valueDone()
		return true, nil
	}
	top.wantValue = true
	return true, nil
}

// value writes a value token: it opens an object or array, or writes a
// scalar, redacted.
func (w *jsonRewriter) value(tok json.Token) error {
	switch v := tok.(type) {
	case json.Delim: // { or [
		if len(w.stack) >= maxDepth {
			return fmt.Errorf("redact: JSON nested deeper than %d", maxDepth)
		}
		w.out.WriteByte(byte(v))
		w.stack = append(w.stack, jsonFrame{obj: v == '{'})
		return nil
	case string:
		writeJSONString(&w.out, w.replace(v))
	case json.Number:
		if w.r.Contains(string(v)) {
			m := w.mask(literalKind, string(v), -1)
			writeJSONString(&w.out, m)
			w.secrets = append(w.secrets, Secret{Kind: literalKind, Original: string(v), Mask: m})
		} else {
			w.out.WriteString(string(v))
		}
	case bool:
		if v {
			w.out.WriteString("true")
		} else {
			w.out.WriteString("false")
		}
	case nil:
		w.out.WriteString("null")
	}
	w.valueDone()
	return nil
}

// captureValue consumes the member value that follows offset from (just
// after its key) and returns it: a string's text, or another value's JSON.
func captureValue(dec *json.Decoder, raw []byte, from int64) (string, error) {
	if err := skipValue(dec); err != nil {
		return "", err
	}
	v := bytes.TrimLeft(raw[from:dec.InputOffset()], " \t\r\n:")
	var str string
	if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &str) == nil {
		return str, nil
	}
	return string(v), nil
}

// skipValue consumes one value (all of it, for an object or array).
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
				if depth > maxDepth {
					return fmt.Errorf("JSON nested deeper than %d", maxDepth)
				}
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

const hexDigits = "0123456789abcdef"

// writeJSONString writes s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 as U+FFFD, HTML left alone.
func writeJSONString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20:
				b.WriteString(`\u00`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xf])
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			b.WriteString(`\u202`)
			b.WriteByte(hexDigits[r&0xf])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}

// sensitiveKey reports whether a JSON member's key names a secret (see JSON).
func sensitiveKey(key string) bool { return sensitiveKeyKind(key) != "" }

// sensitiveKeyKind returns the kind of secret a JSON member's key names,
// or "" (see JSON).
func sensitiveKeyKind(key string) string {
	words := keyWords(key)
	if len(words) == 0 {
		return ""
	}
	for _, w := range words {
		if strings.Contains(w, "password") || strings.Contains(w, "passwd") || strings.Contains(w, "passphrase") {
			return "password"
		}
	}
	last := words[len(words)-1]
	if last == "auth" {
		return "auth"
	}
	for _, k := range []struct{ suffix, kind string }{
		{"token", "token"}, {"secret", "secret"}, {"secrets", "secret"}, {"apikey", "api-key"}, {"privatekey", "private-key"},
		{"accesskey", "access-key"}, {"secretkey", "secret-key"}, {"authorization", "authorization"}, {"cookie", "cookie"},
		{"cookies", "cookie"}, {"credential", "credential"}, {"credentials", "credential"}, {"session", "session"},
		{"sessionid", "session"}, {"sessid", "session"},
	} {
		if strings.HasSuffix(last, k.suffix) {
			return k.kind
		}
	}
	if len(words) >= 3 && words[len(words)-3]+words[len(words)-2]+last == "secretkeybase" || last == "secretkeybase" {
		return "secret-key" // Rails' secret_key_base
	}
	if len(words) >= 2 {
		switch words[len(words)-2] + last {
		case "apikey":
			return "api-key"
		case "privatekey":
			return "private-key"
		case "accesskey":
			return "access-key"
		case "secretkey":
			return "secret-key"
		case "sessionid":
			return "session"
		}
	}
	return ""
}

// keyWords splits a key into lower-case words at non-alphanumerics and
// camelCase boundaries: "X-Api-Key" and "xAPIKey" give [x api key].
func keyWords(key string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(key)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if unicode.IsUpper(r) && len(cur) > 0 {
			prev := cur[len(cur)-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || unicode.IsUpper(prev) && nextLower {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// sensitiveKeyParts are lower-case fragments every sensitive key contains
// (see JSON): a document without any of them has no sensitive key.
var sensitiveKeyParts = []string{"pass", "secret", "token", "key", "auth", "cookie", "credential", "sess"}

// ReplaceCompactJSON is ReplaceJSON for a document the caller knows to be
// valid, compact JSON (json.Marshal's or json.Compact's output): a
// document with nothing to mask (see jsonClean) is returned as it is, not
// read again to be checked and compacted. The result may be raw itself.
func (r *Redactor) ReplaceCompactJSON(raw []byte, mask MaskFunc) ([]byte, []Secret, error) {
	if r == nil {
		r = plain
	}
	if r.jsonClean(raw) {
		return raw, nil, nil
	}
	return r.ReplaceJSON(raw, mask)
}

// jsonClean reports whether a document has nothing to mask, whatever its
// keys and values: no escape sequence (which could spell a secret the raw
// text does not show), no fragment of a sensitive key name, and nothing
// String finds.
func (r *Redactor) jsonClean(raw []byte) bool {
	return bytes.IndexByte(raw, '\\') < 0 && !hasSensitivePart(raw) && len(r.find(string(raw))) == 0
}

// jsonFast handles the common case cheaply: a valid document with nothing
// to mask (jsonClean) is returned compacted as it is. ok is false when the
// full walk is needed. (Compact checks that the document is valid.)
func (r *Redactor) jsonFast(raw []byte) ([]byte, bool) {
	if !r.jsonClean(raw) {
		return nil, false
	}
	var out bytes.Buffer
	out.Grow(len(raw))
	if err := json.Compact(&out, raw); err != nil {
		return nil, false
	}
	return out.Bytes(), true
}

// hasSensitivePart reports whether raw, lower-cased, holds one of
// sensitiveKeyParts. ASCII text is read once for all of them; other text
// is lower-cased as keyWords lower-cases a key (the Kelvin sign is a k).
func hasSensitivePart(raw []byte) bool {
	for _, c := range raw {
		if c >= utf8.RuneSelf {
			lower := bytes.ToLower(raw)
			for _, p := range sensitiveKeyParts {
				if bytes.Contains(lower, []byte(p)) {
					return true
				}
			}
			return false
		}
	}
	return sensitivePartsScanner().has(raw)
}

var (
	sensitiveOnce sync.Once
	sensitiveScan *scanner
)

// sensitivePartsScanner finds sensitiveKeyParts in any ASCII case.
func sensitivePartsScanner() *scanner {
	sensitiveOnce.Do(func() { sensitiveScan = newScanner([]rule{{anchors: sensitiveKeyParts, fold: true}}) })
	return sensitiveScan
}
