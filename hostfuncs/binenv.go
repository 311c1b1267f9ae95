package hostfuncs

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"unicode/utf8"

	"github.com/wardenrt/warden/runtime/tool"
)

// The binary envelope of the buffer path (wasm-tools/README.md, "The
// buffer path"): exactly what a guest decoding the JSON envelope
// (json.Marshal of the tool.Result) with encoding/json gets, laid out so
// that it reads it without scanning. Integers are little-endian; a text is
// a u32 length and its bytes.
//
//	flags        u8   envSuccess | envDryRun | envError | envApproval | envNoWarnings
//	duration_ms  i64
//	tool, call_id, output, data          texts (data: the JSON value, as in
//	                                     the JSON envelope; null when none)
//	warnings     u32 count, texts        (count 0 and envNoWarnings: null)
//	error        with envError: code, message, hint texts; missing_grants
//	             (u32 count, texts); with envApproval: rule, mode, failed
//
// Texts are valid UTF-8: each byte that is not becomes U+FFFD, as
// json.Marshal writes it (\ufffd) and a JSON decoder reads it back.
const (
	envSuccess = 1 << iota
	envDryRun
	envError
	envApproval
	envNoWarnings
)

// binaryEnvelope is res in the binary form. It fails where json.Marshal of
// res would: on data that is not valid JSON.
func binaryEnvelope(res tool.Result) ([]byte, error) {
	var flags byte
	if res.Success {
		flags |= envSuccess
	}
	if res.DryRun {
		flags |= envDryRun
	}
	if res.Warnings == nil {
		flags |= envNoWarnings
	}
	if e := res.Error; e != nil {
		flags |= envError
		if e.Approval != nil {
			flags |= envApproval
		}
	}
	b := make([]byte, 9, 64+len(res.Tool)+len(res.CallID)+len(res.Output)+len(res.Data))
	b[0] = flags
	binary.LittleEndian.PutUint64(b[1:], uint64(res.DurationMS))
	b = appendText(b, res.Tool)
	b = appendText(b, res.CallID)
	b = appendText(b, res.Output)
	b, err := appendData(b, res.Data)
	if err != nil {
		return nil, err
	}
	b = appendTexts(b, res.Warnings)
	if e := res.Error; e != nil {
		b = appendText(b, string(e.Code))
		b = appendText(b, e.Message)
		b = appendText(b, e.Hint)
		b = appendTexts(b, e.Missing)
		if a := e.Approval; a != nil {
			b = appendText(b, a.Rule)
			b = appendText(b, string(a.Mode))
			b = appendText(b, a.Failed)
		}
	}
	return b, nil
}

// appendData appends data as a text, as json.Marshal writes a
// json.RawMessage (null when empty; compacted, HTML characters, U+2028
// and U+2029 escaped), without its reflection, compacted in place; the
// same error for data that is not JSON.
func appendData(b []byte, data json.RawMessage) ([]byte, error) {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	if data == nil {
		b = append(b, "null"...)
	} else {
		buf := bytes.NewBuffer(b)
		if err := json.Compact(buf, data); err != nil {
			return nil, err
		}
		b = buf.Bytes()
		if mayNeedHTMLEscape(b[at+4:]) {
			var esc bytes.Buffer
			json.HTMLEscape(&esc, b[at+4:])
			b = append(b[:at+4], esc.Bytes()...)
		}
	}
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b, nil
}

// mayNeedHTMLEscape reports whether json.HTMLEscape could change b: it
// holds <, > or &, or the first byte of U+2028 or U+2029 (0xE2).
func mayNeedHTMLEscape(b []byte) bool {
	for _, c := range b {
		if c == '<' || c == '>' || c == '&' || c == 0xE2 {
			return true
		}
	}
	return false
}

// appendText appends s's length and s, each byte of it that is not valid
// UTF-8 replaced by U+FFFD.
func appendText(b []byte, s string) []byte {
	if utf8.ValidString(s) {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		return append(b, s...)
	}
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	binary.LittleEndian.PutUint32(b[at:], uint32(len(b)-at-4))
	return b
}

func appendTexts(b []byte, ss []string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ss)))
	for _, s := range ss {
		b = appendText(b, s)
	}
	return b
}

// envelopeData is data as appendData writes it, without its length.
func envelopeData(data json.RawMessage) ([]byte, error) {
	b, err := appendData(nil, data)
	if err != nil {
		return nil, err
	}
	return b[4:], nil
}
