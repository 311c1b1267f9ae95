package hostfuncs

import (
	"context"
	"math"
	"sync"

	extism "github.com/extism/go-sdk"

	"github.com/wardenrt/warden/runtime/tool"
)

// The buffer path of warden_call: the same call through the gate, with the
// request and the envelope passed in one buffer of Extism memory that the
// host allocates once per export call and reuses, instead of a block the
// guest allocates, one the host allocates, and the four Extism kernel calls
// (alloc, length, free, free) that go with them. A kernel call costs a
// round trip into the kernel's own wasm module; the buffer path makes none
// once the buffer exists, and its length is a multiple of 8, so the guest
// copies whole words (load_u64/store_u64) and never a byte at a time.
//
//	warden_buffer(n i64) → i64       the buffer's offset, ≥ n bytes; 0: none
//	warden_call_buffer(n i64) → i64  the request is the buffer's first n
//	                                 bytes; (envelope length << 32) | its
//	                                 offset (in the buffer, which may have
//	                                 moved); 0: no envelope
//
// The envelope comes back in a binary form (binaryEnvelope) holding what
// the guest would read from the JSON envelope, so a guest gets it without
// scanning it: in wasm, a guest's JSON decoder costs more than the gate.
//
// The buffer belongs to one export call of one instance: the first call of
// warden_buffer in an export call allocates it (in that instance's Extism
// memory, which the kernel resets between export calls), and an exchange
// (WithExchange) never hands it to another export call. Without an
// exchange in the context both functions return 0 and a guest sends
// through warden_call. The guest must not free the buffer; everything in
// it is the guest's own (its own memory, which it can read and write
// anyway), so a guest that frees it or writes over it harms only itself.

const (
	// minBuffer is the smallest buffer allocated: most envelopes fit.
	minBuffer = 4 << 10
	// maxEnvelopeBytes caps an envelope written back (the gate caps
	// outputs well below this; it keeps the packing of length and offset
	// in one i64 meaningful).
	maxEnvelopeBytes = math.MaxUint32
)

type exchangeKey struct{}

// exchange is the buffer of one guest export call.
type exchange struct {
	mu sync.Mutex
	// call is the context of the export call the buffer belongs to: the
	// one every host function of that call gets. Another context is
	// another export call (maybe of another instance), whose Extism memory
	// the buffer is not in.
	call     context.Context
	off, cap uint64
	// direct is the guest's region of the direct mode (direct.go), set by
	// warden_buffer for this export call only.
	direct directRegion
}

// WithExchange returns ctx carrying a new exchange, which gives the export
// call made with it the buffer path of warden_call (warden_buffer,
// warden_call_buffer). Make one per export call: a guest call run with
// another call's exchange still works, but allocates a buffer again at
// every request.
func WithExchange(ctx context.Context) context.Context {
	return context.WithValue(ctx, exchangeKey{}, &exchange{})
}

// bufferFunctions are warden_buffer and warden_call_buffer.
func bufferFunctions() []extism.HostFunction {
	i64 := []extism.ValueType{extism.ValueTypeI64}
	b := extism.NewHostFunctionWithStack("warden_buffer",
		func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			stack[0] = wardenBuffer(ctx, p, stack[0])
		}, i64, i64)
	c := extism.NewHostFunctionWithStack("warden_call_buffer",
		func(ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
			stack[0] = wardenCallBuffer(ctx, p, stack[0])
		}, i64, i64)
	b.SetNamespace(ModuleName)
	c.SetNamespace(ModuleName)
	return []extism.HostFunction{b, c}
}

// exchangeFrom returns the exchange in ctx, locked, its buffer dropped when
// it belongs to another export call than ctx's.
func exchangeFrom(ctx context.Context) (*exchange, bool) {
	x, ok := ctx.Value(exchangeKey{}).(*exchange)
	if !ok || x == nil {
		return nil, false
	}
	x.mu.Lock()
	if x.call != ctx {
		x.call, x.off, x.cap, x.direct = ctx, 0, 0, directRegion{}
	}
	return x, true
}

// wardenBuffer is warden_buffer: the offset of a buffer of at least n
// bytes, or 0.
func wardenBuffer(ctx context.Context, p *extism.CurrentPlugin, n uint64) (out uint64) {
	defer func() {
		if recover() != nil {
			out = 0
		}
	}()
	if n&directFlag != 0 {
		return registerDirect(ctx, n)
	}
	if n > maxRequestBytes {
		return 0 // warden_call answers it with WASM_LIMIT
	}
	x, ok := exchangeFrom(ctx)
	if !ok {
		return 0
	}
	defer x.mu.Unlock()
	if !x.reserve(p, n) {
		return 0
	}
	return x.off
}

// wardenCallBuffer is warden_call_buffer: the request in the buffer's
// first n bytes → the envelope's length and offset packed, or 0.
func wardenCallBuffer(ctx context.Context, p *extism.CurrentPlugin, n uint64) uint64 {
	return callBuffer(ctx, p, n, handle)
}

// callBuffer is warden_call_buffer with h making the envelope of the
// request (raw nil: over maxRequestBytes, not read).
func callBuffer(ctx context.Context, p *extism.CurrentPlugin, n uint64, h func(context.Context, []byte, uint64) tool.Result) (out uint64) {
	defer func() {
		if recover() != nil {
			out = 0
		}
	}()
	x, ok := exchangeFrom(ctx)
	if !ok {
		return 0
	}
	direct := n&directFlag != 0
	n &^= directFlag
	raw, ok := func() ([]byte, bool) {
		defer x.mu.Unlock()
		if direct {
			return x.direct.request(n)
		}
		return x.request(p, n)
	}()
	if !ok {
		return 0
	}
	res := h(ctx, raw, n)
	x, _ = exchangeFrom(ctx)
	defer x.mu.Unlock()
	return x.envelope(p, res, direct)
}

// live reports whether the buffer is set and inside the memory (it always
// is unless the memory changed under it).
func (x *exchange) live(p *extism.CurrentPlugin) bool {
	mem := p.Memory()
	return x.off != 0 && mem != nil && x.off+x.cap <= uint64(mem.Size())
}

// reserve makes the buffer at least n bytes (rounded up to a multiple of
// 8, at least minBuffer), allocating a new one (and freeing the old) when
// it is smaller. Its content is not kept.
func (x *exchange) reserve(p *extism.CurrentPlugin, n uint64) bool {
	if x.off != 0 && x.cap >= n && x.live(p) {
		return true
	}
	size := max((n+7)&^7, minBuffer)
	if size > math.MaxUint32 {
		return false
	}
	off, err := p.Alloc(size)
	if err != nil || off == 0 { // the kernel answers 0 when memory cannot grow
		return false
	}
	if x.off != 0 {
		_ = p.Free(x.off)
	}
	x.off, x.cap = off, size
	if !x.live(p) {
		x.off, x.cap = 0, 0
		return false
	}
	return true
}

// request copies the request out of the buffer: its first n bytes. ok is
// false when there is no buffer or n is 0 or beyond it; raw is nil when n
// is over maxRequestBytes.
func (x *exchange) request(p *extism.CurrentPlugin, n uint64) (raw []byte, ok bool) {
	if n == 0 || n > x.cap || !x.live(p) {
		return nil, false
	}
	if n > maxRequestBytes {
		return nil, true
	}
	b, ok := p.Memory().Read(uint32(x.off), uint32(n))
	if !ok {
		return nil, false
	}
	return append([]byte(nil), b...), true // Read is a view of the guest's memory
}

// envelope writes res into the buffer (grown when it does not fit) and
// returns its length and offset packed; a short WASM_LIMIT envelope when
// the buffer cannot grow enough, 0 when not even that fits. With direct,
// an envelope that fits in the guest's region goes there instead, offset
// 0.
func (x *exchange) envelope(p *extism.CurrentPlugin, res tool.Result, direct bool) uint64 {
	b, err := binaryEnvelope(res)
	if err != nil { // cannot happen: Result holds valid JSON only
		res = localEnvelope(res.Tool, tool.Errorf(tool.CodeInternal, "", "the envelope could not be encoded"))
		b, _ = binaryEnvelope(res)
	}
	if direct && x.direct.write(b) {
		return uint64(len(b)) << 32
	}
	if off, ok := x.write(p, b); ok {
		return uint64(len(b))<<32 | off
	}
	short := localEnvelope(res.Tool, tool.Errorf(tool.CodeWasmLimit, "give the tool more memory (limits.memory_mb) or ask for less",
		"the envelope of %s (%d bytes) does not fit in the guest's memory", truncate(res.Tool, 128), len(b)))
	short.CallID = res.CallID
	sb, _ := binaryEnvelope(short)
	if len(sb) >= len(b) {
		return 0
	}
	if direct && x.direct.write(sb) {
		return uint64(len(sb)) << 32
	}
	if off, ok := x.write(p, sb); ok {
		return uint64(len(sb))<<32 | off
	}
	return 0
}

// write puts b at the start of the buffer, growing it first if needed.
func (x *exchange) write(p *extism.CurrentPlugin, b []byte) (uint64, bool) {
	if len(b) == 0 || uint64(len(b)) > maxEnvelopeBytes || !x.reserve(p, uint64(len(b))) {
		return 0, false
	}
	if !p.Memory().Write(uint32(x.off), b) {
		return 0, false
	}
	return x.off, true
}
