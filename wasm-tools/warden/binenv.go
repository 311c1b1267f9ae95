package warden

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"unsafe"
)

// The binary envelope warden_call_buffer answers with (wasm-tools/
// README.md, "The buffer path"): the fields of the JSON envelope, laid out
// to be read without scanning.
const (
	envSuccess = 1 << iota
	envDryRun
	envError
	envApproval
	envNoWarnings
)

var errBinaryEnvelope = errors.New("warden: malformed envelope (buffer path)")

// binReader reads the binary envelope; after the first error every read
// gives zero values and err stays set. Texts are cut from s, b read as a
// string without a copy (no allocation at all, not one per text), bytes
// from b.
type binReader struct {
	b   []byte
	s   string
	at  int
	err error
}

// next returns the bounds of the next length-prefixed field.
func (r *binReader) next() (int, int) {
	if r.err != nil || len(r.b)-r.at < 4 {
		r.err = errBinaryEnvelope
		return 0, 0
	}
	n := binary.LittleEndian.Uint32(r.b[r.at:])
	start := r.at + 4
	if uint64(len(r.b)-start) < uint64(n) {
		r.err = errBinaryEnvelope
		return 0, 0
	}
	r.at = start + int(n)
	return start, r.at
}

// bytes returns the next field as a slice of b whose capacity ends with it
// (an append to it cannot reach the rest).
func (r *binReader) bytes() []byte {
	i, j := r.next()
	return r.b[i:j:j]
}

func (r *binReader) text() string {
	i, j := r.next()
	return r.s[i:j]
}

// texts reads a count and as many texts; count 0 is empty (nil unless
// keepEmpty).
func (r *binReader) texts(keepEmpty bool) []string {
	if r.err != nil || len(r.b)-r.at < 4 {
		r.err = errBinaryEnvelope
		return nil
	}
	n := binary.LittleEndian.Uint32(r.b[r.at:])
	r.at += 4
	if uint64(n) > uint64(len(r.b)-r.at)/4 { // each text takes at least 4 bytes
		r.err = errBinaryEnvelope
		return nil
	}
	if n == 0 && !keepEmpty {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.text()
	}
	return out
}

// decodeBinaryEnvelope reads the binary envelope: the Envelope that
// DecodeEnvelope gives for the JSON envelope of the same result. It takes
// b: the Envelope's texts and Data are b's memory, and nothing may change
// b afterwards. Data is the only []byte of it handed out, and it neither
// overlaps a text nor reaches one (its capacity ends with it), so no text
// ever changes.
func decodeBinaryEnvelope(b []byte) (Envelope, error) {
	if len(b) < 9 {
		return Envelope{}, errBinaryEnvelope
	}
	flags := b[0]
	e := Envelope{
		Success:    flags&envSuccess != 0,
		DryRun:     flags&envDryRun != 0,
		DurationMS: int64(binary.LittleEndian.Uint64(b[1:])),
	}
	r := &binReader{b: b, s: unsafe.String(unsafe.SliceData(b), len(b)), at: 9}
	e.Tool = r.text()
	e.CallID = r.text()
	e.Output = r.text()
	e.Data = json.RawMessage(r.bytes()) // b is the caller's own copy, and no text overlaps it
	e.Warnings = r.texts(true)
	if flags&envNoWarnings != 0 && len(e.Warnings) == 0 {
		e.Warnings = nil
	}
	if flags&envError != 0 {
		e.Error = &Error{Code: r.text(), Message: r.text(), Hint: r.text(), MissingGrants: r.texts(false)}
		if flags&envApproval != 0 {
			e.Error.Approval = &Approval{Rule: r.text(), Mode: r.text(), Failed: r.text()}
		}
	}
	if r.err != nil || r.at != len(r.b) || len(e.Data) == 0 {
		return Envelope{}, errBinaryEnvelope
	}
	if !e.Success && e.Error == nil && e.Tool == "" {
		return Envelope{}, errBinaryEnvelope
	}
	return e, nil
}
