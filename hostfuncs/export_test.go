package hostfuncs

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero/api"

	"github.com/wardenrt/warden/runtime/tool"
)

// WardenCall is warden_call's implementation, for tests that hand it a
// request block of their own from inside a real guest call.
func WardenCall(ctx context.Context, p *extism.CurrentPlugin, in uint64) uint64 {
	return wardenCall(ctx, p, in)
}

// WardenBuffer and WardenCallBuffer are warden_buffer and
// warden_call_buffer, for tests that play a guest from inside a real guest
// call.
func WardenBuffer(ctx context.Context, p *extism.CurrentPlugin, n uint64) uint64 {
	return wardenBuffer(ctx, p, n)
}

func WardenCallBuffer(ctx context.Context, p *extism.CurrentPlugin, n uint64) uint64 {
	return wardenCallBuffer(ctx, p, n)
}

// Invoke runs the implementation of the host function named f.Name.
func Invoke(f extism.HostFunction, ctx context.Context, p *extism.CurrentPlugin, stack []uint64) {
	switch f.Name {
	case "warden_call":
		stack[0] = wardenCall(ctx, p, stack[0])
	case "warden_buffer":
		stack[0] = wardenBuffer(ctx, p, stack[0])
	case "warden_call_buffer":
		stack[0] = wardenCallBuffer(ctx, p, stack[0])
	default:
		panic("no host function " + f.Name)
	}
}

// CallBufferCanned is warden_call_buffer answering every request with res,
// without the gate: the buffer path's own cost, for benchmarks.
func CallBufferCanned(ctx context.Context, p *extism.CurrentPlugin, n uint64, res tool.Result) uint64 {
	return callBuffer(ctx, p, n, func(context.Context, []byte, uint64) tool.Result { return res })
}

// DecodeBinaryEnvelope reads the buffer path's binary envelope (binenv.go)
// back into a tool.Result, as a test reads a JSON envelope.
func DecodeBinaryEnvelope(b []byte) (tool.Result, error) {
	bad := errors.New("malformed binary envelope")
	if len(b) < 9 {
		return tool.Result{}, bad
	}
	flags, rest := b[0], b[9:]
	res := tool.Result{Success: flags&envSuccess != 0, DryRun: flags&envDryRun != 0, DurationMS: int64(binary.LittleEndian.Uint64(b[1:]))}
	var err error
	text := func() string {
		if err != nil || len(rest) < 4 || uint64(len(rest)-4) < uint64(binary.LittleEndian.Uint32(rest)) {
			err = bad
			return ""
		}
		n := binary.LittleEndian.Uint32(rest)
		s := string(rest[4 : 4+n])
		rest = rest[4+n:]
		return s
	}
	texts := func() []string {
		if err != nil || len(rest) < 4 {
			err = bad
			return nil
		}
		n := binary.LittleEndian.Uint32(rest)
		rest = rest[4:]
		out := []string{}
		for range n {
			out = append(out, text())
		}
		return out
	}
	res.Tool, res.CallID, res.Output, res.Data = text(), text(), text(), json.RawMessage(text())
	if res.Warnings = texts(); flags&envNoWarnings != 0 {
		res.Warnings = nil
	}
	if flags&envError != 0 {
		res.Error = &tool.Error{Code: tool.Code(text()), Message: text(), Hint: text(), Missing: texts()}
		if flags&envApproval != 0 {
			res.Error.Approval = &tool.ApprovalNeeded{Rule: text(), Mode: tool.ApprovalMode(text()), Failed: text()}
		}
	}
	if err == nil && len(rest) != 0 {
		err = bad
	}
	return res, err
}

// GuestMemory is the linear memory of the guest whose export call ctx
// belongs to (the direct mode's memory), nil when unavailable.
func GuestMemory(ctx context.Context) api.Memory { return guestMemory(ctx) }
