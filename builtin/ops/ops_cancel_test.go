//go:build linux

package ops

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// A call whose context is cancelled — before it starts a program, or while
// the program runs — ends with TOOL_ERROR ("the call was cancelled"), not a
// timeout, promptly, and a cancelled restart leaves the service's state
// alone when it never started.
func TestOpsCancelled(t *testing.T) {
	calls := []struct {
		tool, args string
		slow       string // args whose program hangs
	}{
		{"read_logs", `{"unit":"nginx"}`, `{"unit":"slow"}`},
		{"service_status", `{"unit":"nginx"}`, `{"unit":"slow"}`},
		{"restart_service", `{"unit":"nginx"}`, `{"unit":"slowrestart"}`},
	}
	call := func(t *testing.T, e *opsEnv, ctx context.Context, tool, args string) tool.Result {
		t.Helper()
		res, err := e.g.Call(ctx, gate.Request{Tool: tool, Args: json.RawMessage(args), Principal: []string{"test"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, c := range calls {
		t.Run(c.tool+"/before", func(t *testing.T) {
			e := setup(t)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			before := e.checksum(t)
			res := call(t, e, ctx, c.tool, c.args)
			wantErr(t, res, tool.CodeToolError, "was stopped: the call was cancelled")
			if got := e.fx.calls(t); len(got) != 0 {
				t.Errorf("a cancelled call ran %q", got)
			}
			if e.checksum(t) != before {
				t.Error("a cancelled call changed something")
			}
		})
		t.Run(c.tool+"/while running", func(t *testing.T) {
			e := setup(t) // the programs' own deadline stays at 20 s
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			timer := time.AfterFunc(300*time.Millisecond, cancel)
			defer timer.Stop()
			start := time.Now()
			res := call(t, e, ctx, c.tool, c.slow)
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("the call took %s after being cancelled at 300ms", el)
			}
			wantErr(t, res, tool.CodeToolError, "was stopped: the call was cancelled")
			if strings.Contains(res.Error.Message, "did not finish in time") {
				t.Errorf("a cancellation reported as a timeout: %+v", res.Error)
			}
			if tooltest.Count(e.audit, `"TOOL_ERROR"`) == 0 {
				t.Error("the audit log does not record the failure")
			}
		})
	}
}
