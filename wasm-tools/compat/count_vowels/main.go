//go:build wasip1

// Command count_vowels reproduces the best-known published Extism plugin:
// one export named after what it does (count_vowels, not call), raw text as
// its input — no JSON, no schema, no sidecar — and a JSON result. Like the
// published one it keeps a running total in an Extism var and takes the
// vowels from config (default aeiouAEIOU). It writes its JSON by hand, so
// encoding/json stays out and the module has the size of a small published
// Go plugin (about 2 MB), which warden's fresh-process benchmark runs.
package main

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/extism/go-pdk"
)

func main() {}

//go:wasmexport count_vowels
func countVowels() int32 {
	input := pdk.InputString()
	vowels, ok := pdk.GetConfig("vowels")
	if !ok {
		vowels = "aeiouAEIOU"
	}
	count := 0
	for _, r := range input {
		if strings.ContainsRune(vowels, r) {
			count++
		}
	}
	total := count
	if v := pdk.GetVar("total"); v != nil {
		if n, err := strconv.Atoi(string(v)); err == nil {
			total += n
		}
	}
	pdk.SetVar("total", []byte(strconv.Itoa(total)))
	// {"count":…,"total":…,"vowels":"…"}, as encoding/json writes it,
	// without its weight.
	b := []byte(`{"count":`)
	b = strconv.AppendInt(b, int64(count), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, `,"vowels":`...)
	b = appendJSONString(b, vowels)
	pdk.Output(append(b, '}'))
	return 0
}

// appendJSONString appends s quoted as encoding/json quotes it (HTML
// characters, U+2028 and U+2029 escaped, invalid UTF-8 as \ufffd).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\b':
			b = append(b, '\\', 'b')
		case r == '\f':
			b = append(b, '\\', 'f')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r == '\t':
			b = append(b, '\\', 't')
		case r < 0x20 || r == '<' || r == '>' || r == '&':
			b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&0xF])
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}
