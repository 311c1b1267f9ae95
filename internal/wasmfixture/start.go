package wasmfixture

import (
	"bytes"
	"errors"
	"fmt"
)

// StartReturns and StartTraps are bodies for [WithStart]: a _start that
// returns at once, and one that executes unreachable.
var (
	StartReturns = []byte{}
	StartTraps   = []byte{0x00}
)

// WithStart returns module with one more function, () → (), whose code is
// body (instructions, without locals or the final end), exported as
// _start. A standard-Go reactor servlet rewritten so has the exports of a
// TinyGo `-target wasi` servlet: _start beside describe and call.
func WithStart(module, body []byte) ([]byte, error) {
	if len(module) < 8 || !bytes.Equal(module[:4], []byte("\x00asm")) {
		return nil, errors.New("wasmfixture: not a wasm module")
	}
	type section struct {
		id   byte
		body []byte
	}
	var secs []section
	r := module[8:]
	for len(r) > 0 {
		id := r[0]
		size, n, err := readULEB(r[1:])
		if err != nil {
			return nil, err
		}
		start := 1 + n
		if uint64(len(r)-start) < size {
			return nil, errors.New("wasmfixture: truncated section")
		}
		secs = append(secs, section{id, r[start : start+int(size)]})
		r = r[start+int(size):]
	}
	count := func(b []byte) (uint64, []byte, error) {
		c, n, err := readULEB(b)
		return c, b[n:], err
	}
	var nTypes, nImportedFuncs, nFuncs uint64
	for _, s := range secs {
		switch s.id {
		case 1:
			c, _, err := count(s.body)
			if err != nil {
				return nil, err
			}
			nTypes = c
		case 2:
			c, rest, err := count(s.body)
			if err != nil {
				return nil, err
			}
			for i := uint64(0); i < c; i++ {
				for range 2 { // module, name
					l, n, err := readULEB(rest)
					if err != nil {
						return nil, err
					}
					rest = rest[n+int(l):]
				}
				kind := rest[0]
				rest = rest[1:]
				switch kind {
				case 0: // func: type index
					_, n, err := readULEB(rest)
					if err != nil {
						return nil, err
					}
					rest = rest[n:]
					nImportedFuncs++
				case 1: // table: reftype, limits
					rest = skipLimits(rest[1:])
				case 2: // memory
					rest = skipLimits(rest)
				case 3: // global: valtype, mut
					rest = rest[2:]
				default:
					return nil, fmt.Errorf("wasmfixture: import kind %d", kind)
				}
			}
		case 3:
			c, _, err := count(s.body)
			if err != nil {
				return nil, err
			}
			nFuncs = c
		}
	}
	appendItem := func(body, item []byte) ([]byte, error) {
		c, rest, err := count(body)
		if err != nil {
			return nil, err
		}
		return append(append(uleb(c+1), rest...), item...), nil
	}
	funcIndex := nImportedFuncs + nFuncs
	var out []byte
	out = append(out, module[:8]...)
	for _, s := range secs {
		b := s.body
		var err error
		switch s.id {
		case 1:
			b, err = appendItem(b, []byte{0x60, 0, 0})
		case 3:
			b, err = appendItem(b, uleb(nTypes))
		case 7:
			b, err = appendItem(b, append(append(uleb(uint64(len("_start"))), "_start"...), append([]byte{0}, uleb(funcIndex)...)...))
		case 10:
			code := append(append([]byte{0}, body...), 0x0b)
			b, err = appendItem(b, append(uleb(uint64(len(code))), code...))
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s.id)
		out = append(out, uleb(uint64(len(b)))...)
		out = append(out, b...)
	}
	return out, nil
}

func skipLimits(b []byte) []byte {
	flags := b[0]
	b = b[1:]
	_, n, _ := readULEB(b)
	b = b[n:]
	if flags&1 != 0 {
		_, n, _ = readULEB(b)
		b = b[n:]
	}
	return b
}

func readULEB(b []byte) (uint64, int, error) {
	var v uint64
	for i, shift := 0, uint(0); i < len(b) && shift < 64; i, shift = i+1, shift+7 {
		v |= uint64(b[i]&0x7f) << shift
		if b[i]&0x80 == 0 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errors.New("wasmfixture: bad LEB128")
}

func uleb(n uint64) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		n >>= 7
		if n != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}
