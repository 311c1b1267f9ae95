//go:build wasip1

package warden

import (
	"encoding/binary"

	"github.com/extism/go-pdk"
)

// wardenCall is the host function every warden provides: the offset of a
// request block in, the offset of an envelope block out.
//
//go:wasmimport warden warden_call
func wardenCall(input uint64) uint64

// wardenBuffer and wardenCallBuffer are the buffer path of warden_call:
// the request and the envelope in one buffer of Extism memory the host
// keeps for the export call (see the package doc).
//
//go:wasmimport warden warden_buffer
func wardenBuffer(n uint64) uint64

//go:wasmimport warden warden_call_buffer
func wardenCallBuffer(n uint64) uint64

// The Extism kernel's word copies (go-pdk has them, internally).
//
//go:wasmimport extism:host/env load_u64
func loadU64(offset uint64) uint64

//go:wasmimport extism:host/env store_u64
func storeU64(offset, v uint64)

// roundTrip passes req to warden and returns the envelope: through the
// buffer when the host gives one, through warden_call otherwise (a request
// over the host's limit, or a host call without the buffer path).
func roundTrip(req []byte) (Envelope, error) {
	n := uint64(len(req))
	if off := wardenBuffer(n); off != 0 {
		storeWords(off, req)
		r := wardenCallBuffer(n)
		if r == 0 || r>>32 == 0 {
			return Envelope{}, ErrNoEnvelope
		}
		return decodeBinaryEnvelope(loadWords(r&0xffffffff, r>>32))
	}
	in := pdk.AllocateBytes(req)
	off := wardenCall(in.Offset())
	in.Free()
	if off == 0 {
		return Envelope{}, ErrNoEnvelope
	}
	out := pdk.FindMemory(off)
	if out.Length() == 0 {
		return Envelope{}, ErrNoEnvelope
	}
	b := out.ReadBytes()
	out.Free()
	return DecodeEnvelope(b)
}

// storeWords copies b to off in whole words: the buffer's length is a
// multiple of 8, so the last word's padding stays inside it.
func storeWords(off uint64, b []byte) {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		storeU64(off+uint64(i), binary.LittleEndian.Uint64(b[i:]))
	}
	if i < len(b) {
		var w [8]byte
		copy(w[:], b[i:])
		storeU64(off+uint64(i), binary.LittleEndian.Uint64(w[:]))
	}
}

// loadWords reads n bytes at off in whole words (see storeWords).
func loadWords(off, n uint64) []byte {
	b := make([]byte, (n+7)&^7)
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], loadU64(off+uint64(i)))
	}
	return b[:n]
}

func readInput() ([]byte, error) { return pdk.Input(), nil }

func writeOutput(b []byte) { pdk.Output(b) }

func setError(msg string) { pdk.SetErrorString(msg) }

func config(key string) (string, bool) { return pdk.GetConfig(key) }
