package hostfuncs

import (
	"context"

	extism "github.com/extism/go-sdk"
)

// WardenCall is warden_call's implementation, for tests that hand it a
// request block of their own from inside a real guest call.
func WardenCall(ctx context.Context, p *extism.CurrentPlugin, in uint64) uint64 {
	return wardenCall(ctx, p, in)
}
