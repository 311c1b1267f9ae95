//go:build wasip1

package warden

import (
	"encoding/binary"
	"unsafe"

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
// buffer in the guest's own memory when the host takes one (the direct
// mode), through the buffer in Extism memory when it gives one, through
// warden_call otherwise (a request over the host's limit, or a host call
// without the buffer path). req may be the region (requestBuffer), which
// goes back at the end.
func roundTrip(req []byte) (Envelope, error) {
	buf := req[:cap(req)]
	defer func() { region = buf }()
	e, err, ok := roundTripDirect(req, &buf)
	if ok {
		return e, err
	}
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

// The direct mode (wasm-tools/README.md, "The buffer path"): the host
// reads the request from a region of the guest's memory and writes the
// envelope into it, one copy each, where the buffer in Extism memory costs
// a host call per word.
const (
	directFlag = 1 << 63
	// minRegion is the region's smallest size: most envelopes fit.
	minRegion = 8 << 10
	// maxDirect is the host's request limit; a larger request goes
	// through warden_call, which answers WASM_LIMIT.
	maxDirect = 1<<20 + 4<<10
)

// region is the direct mode's buffer, kept between round trips (the host
// forgets it after each export call, so it is registered at each round
// trip). A round trip takes it (requestBuffer: region is nil meanwhile)
// and puts it back when done, so a goroutine the guest switches to in
// between — an allocation can park one for the garbage collector — makes
// a buffer of its own instead of writing into this one.
var region []byte

// requestBuffer takes the region for Call to write its request into, so
// that it need not be copied there; roundTrip puts it back.
func requestBuffer() []byte {
	b := region
	region = nil
	if len(b) < minRegion {
		b = make([]byte, minRegion)
	}
	return b[:0]
}

// roundTripDirect is roundTrip through the direct mode, with *buf (req's
// array, or a new one it sets) as the region; ok is false when the host
// does not take the region (an older warden, a host call without the
// buffer path), and nothing was sent.
func roundTripDirect(req []byte, buf *[]byte) (e Envelope, err error, ok bool) {
	if len(req) > maxDirect {
		return Envelope{}, nil, false
	}
	r := *buf
	if len(r) < max(len(req), minRegion) {
		r = make([]byte, max(len(req), minRegion))
		copy(r, req)
		*buf = r
	}
	ptr := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(r))))
	if wardenBuffer(directFlag|uint64(len(r))<<32|ptr) != ptr {
		return Envelope{}, nil, false
	}
	a := wardenCallBuffer(directFlag | uint64(len(req)))
	n, off := a>>32, a&0xffffffff
	var b []byte
	switch {
	case n == 0:
		return Envelope{}, ErrNoEnvelope, true
	case off != 0: // too large for the region: in the Extism buffer
		b = loadWords(off, n)
	case n <= uint64(len(r)):
		b = append([]byte(nil), r[:n]...) // the Envelope's Data keeps it
	default:
		return Envelope{}, ErrNoEnvelope, true
	}
	e, err = decodeBinaryEnvelope(b)
	return e, err, true
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
