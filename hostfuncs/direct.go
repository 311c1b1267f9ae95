package hostfuncs

import (
	"bytes"
	"context"
	"math"

	"github.com/tetratelabs/wazero/api"
)

// The direct mode of the buffer path: the request and the envelope in a
// region of the guest's own linear memory, which the host reads and writes
// in one copy each, instead of the Extism buffer, which a guest reaches
// only a word per host call (load_u64, store_u64: two thirds of a round
// trip's cost in a Go guest, whose every loop iteration is a host exit
// too under the runtime's deadline check). No new import: the two buffer
// functions take it in their argument's top bit, which an older warden
// refuses (0), so a guest built for the direct mode falls back to the
// buffer in Extism memory there.
//
//	warden_buffer(1<<63 | cap<<32 | ptr) → ptr   registers [ptr, ptr+cap)
//	                                             of the guest's memory for
//	                                             this export call; 0: refused
//	warden_call_buffer(1<<63 | n) → n'<<32 | off the request is the region's
//	                                             first n bytes; the envelope
//	                                             (n' bytes) is at the region's
//	                                             start when off is 0, else
//	                                             in the Extism buffer at off
//
// Everything in the region is the guest's own: a guest that lies about it
// reads or overwrites only its own memory, and every copy is checked
// against the memory's bounds when it is made, so a region that does not
// fit (any more) gets 0 (or the envelope in the Extism buffer), never a
// trap. A region belongs to the export call that registered it (the
// exchange forgets it at the next call).

// directFlag marks the direct mode in warden_buffer's and
// warden_call_buffer's argument.
const directFlag = 1 << 63

// directRegion is a registered region, its memory looked up once.
type directRegion struct {
	mem      api.Memory
	ptr, cap uint64
}

// registerDirect is warden_buffer(directFlag | cap<<32 | ptr): it records
// the region in the call's exchange and answers ptr, or 0 (no exchange, no
// guest memory, a region empty, at 0, or not inside the memory). A refused
// region unregisters any earlier one.
func registerDirect(ctx context.Context, arg uint64) uint64 {
	x, ok := exchangeFrom(ctx)
	if !ok {
		return 0
	}
	defer x.mu.Unlock()
	x.direct = directRegion{}
	ptr, size := arg&math.MaxUint32, arg>>32&math.MaxInt32
	if ptr == 0 || size == 0 {
		return 0
	}
	mem := guestMemory(ctx)
	if mem == nil || ptr+size > uint64(mem.Size()) {
		return 0
	}
	x.direct = directRegion{mem: mem, ptr: ptr, cap: size}
	return ptr
}

// inside reports whether the region's first n bytes are (still) inside
// the memory.
func (r *directRegion) inside(n uint64) bool {
	return r.mem != nil && n <= r.cap && r.ptr+n <= uint64(r.mem.Size())
}

// request copies the region's first n bytes. ok is false when there is no
// region or n is 0 or beyond it; raw is nil when n is over
// maxRequestBytes (not read: warden_call's WASM_LIMIT).
func (r *directRegion) request(n uint64) (raw []byte, ok bool) {
	if n == 0 || !r.inside(n) {
		return nil, false
	}
	if n > maxRequestBytes {
		return nil, true
	}
	b, ok := r.mem.Read(uint32(r.ptr), uint32(n))
	if !ok {
		return nil, false
	}
	return bytes.Clone(b), true // Read is a view of the guest's memory
}

// write puts b at the region's start, if it fits.
func (r *directRegion) write(b []byte) bool {
	return len(b) != 0 && r.inside(uint64(len(b))) && r.mem.Write(uint32(r.ptr), b)
}
