package wasmtools

import (
	"bytes"
	"errors"
	"fmt"
)

// Module is what Inspect finds in a wasm binary.
type Module struct {
	// Exports maps each export name to its kind: "func", "table",
	// "memory" or "global".
	Exports map[string]string
	// Imports maps "module.name" to its kind.
	Imports map[string]string
	// MemoryMinPages is the declared minimum of the (first) memory, in
	// 64 KiB pages; -1 when the module has no memory.
	MemoryMinPages int64
}

var kinds = [...]string{"func", "table", "memory", "global", "tag"}

// Inspect parses the import, memory and export sections of a wasm binary
// (a small parser: enough to check fixtures, not a validator).
func Inspect(wasm []byte) (Module, error) {
	m := Module{Exports: map[string]string{}, Imports: map[string]string{}, MemoryMinPages: -1}
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) {
		return m, errors.New("wasmtools: not a wasm module (bad magic)")
	}
	if !bytes.Equal(wasm[4:8], []byte{1, 0, 0, 0}) {
		return m, fmt.Errorf("wasmtools: unsupported wasm version % x", wasm[4:8])
	}
	r := &reader{b: wasm[8:]}
	for !r.done() {
		id := r.byte()
		size := r.u32()
		body := r.take(size)
		if r.err != nil {
			return m, r.err
		}
		s := &reader{b: body}
		switch id {
		case 2: // import
			for n := s.u32(); n > 0 && s.err == nil; n-- {
				mod, name := s.name(), s.name()
				k := s.byte()
				switch k {
				case 0: // func: type index
					s.u32()
				case 1: // table: reftype + limits
					s.byte()
					s.limits()
				case 2: // memory
					if min := s.limits(); m.MemoryMinPages < 0 {
						m.MemoryMinPages = int64(min)
					}
				case 3: // global: valtype + mut
					s.byte()
					s.byte()
				case 4: // tag
					s.byte()
					s.u32()
				default:
					return m, fmt.Errorf("wasmtools: unknown import kind %d", k)
				}
				m.Imports[mod+"."+name] = kindName(k)
			}
		case 5: // memory
			if n := s.u32(); n > 0 {
				if min := s.limits(); m.MemoryMinPages < 0 {
					m.MemoryMinPages = int64(min)
				}
			}
		case 7: // export
			for n := s.u32(); n > 0 && s.err == nil; n-- {
				name := s.name()
				k := s.byte()
				s.u32()
				m.Exports[name] = kindName(k)
			}
		}
		if s.err != nil {
			return m, fmt.Errorf("wasmtools: section %d: %w", id, s.err)
		}
	}
	return m, nil
}

func kindName(k byte) string {
	if int(k) < len(kinds) {
		return kinds[k]
	}
	return fmt.Sprintf("kind%d", k)
}

type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated module")

func (r *reader) done() bool { return r.err != nil || len(r.b) == 0 }

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.err = errShort
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// u32 reads an unsigned LEB128 value of at most 32 bits.
func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = errors.New("LEB128 value too long")
	return 0
}

func (r *reader) take(n uint32) []byte {
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.err = errShort
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *reader) name() string { return string(r.take(r.u32())) }

// limits reads wasm limits and returns the minimum. Flags: bit 0 = has
// max, bit 2 = 64-bit (memory64 uses the same LEB encoding here).
func (r *reader) limits() uint32 {
	flags := r.byte()
	min := r.u32()
	if flags&1 != 0 {
		r.u32()
	}
	return min
}
