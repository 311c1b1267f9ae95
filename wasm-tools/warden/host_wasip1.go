//go:build wasip1

package warden

import (
	"github.com/extism/go-pdk"
)

// wardenCall is the one host function warden provides: the offset of a
// request block in, the offset of an envelope block out.
//
//go:wasmimport warden warden_call
func wardenCall(input uint64) uint64

// send passes req to warden_call and returns the envelope bytes. The guest
// frees both blocks.
func send(req []byte) ([]byte, error) {
	in := pdk.AllocateBytes(req)
	off := wardenCall(in.Offset())
	in.Free()
	if off == 0 {
		return nil, ErrNoEnvelope
	}
	out := pdk.FindMemory(off)
	if out.Length() == 0 {
		return nil, ErrNoEnvelope
	}
	b := out.ReadBytes()
	out.Free()
	return b, nil
}

func readInput() ([]byte, error) { return pdk.Input(), nil }

func writeOutput(b []byte) { pdk.Output(b) }

func setError(msg string) { pdk.SetErrorString(msg) }

func config(key string) (string, bool) { return pdk.GetConfig(key) }
