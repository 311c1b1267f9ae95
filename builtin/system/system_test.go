package system

import (
	"context"
	"encoding/json"
	"errors"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"

	"github.com/wardenrt/warden/builtin/internal/tooltest"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/tool"
)

func newGate(t testing.TB, sys *System, p *policy.Policy) *gate.Gate {
	t.Helper()
	g, _ := tooltest.GateWith(t, p, t.TempDir(), tool.Adapt[Args](sys))
	return g
}

func callSystem(t testing.TB, g *gate.Gate, args string) tool.Result {
	t.Helper()
	return tooltest.Call(t, g, "system", args)
}

func TestSystemGetInfo(t *testing.T) {
	g := newGate(t, &System{Config{Version: "1.2.3"}}, policy.DefaultPolicy())
	res := callSystem(t, g, `{"operation":"get_info"}`)
	if !res.Success {
		t.Fatalf("%+v", res.Error)
	}
	var info Info
	if err := json.Unmarshal(res.Data, &info); err != nil {
		t.Fatal(err)
	}
	if info.OS != goruntime.GOOS || info.Arch != goruntime.GOARCH || info.CPUs != goruntime.NumCPU() ||
		info.KernelRelease == "" || info.Hostname == "" || info.WardenVersion != "1.2.3" || info.GoVersion != goruntime.Version() {
		t.Fatalf("info %+v", info)
	}
}

func TestSystemGetStatus(t *testing.T) {
	sys := &System{Config{State: func(context.Context) (RuntimeState, error) {
		return RuntimeState{AuditHeadSeq: 42, ToolsLoaded: 7, Policy: "p"}, nil
	}}}
	res := callSystem(t, newGate(t, sys, policy.DefaultPolicy()), `{"operation":"get_status"}`)
	var st Status
	if err := json.Unmarshal(res.Data, &st); err != nil || !res.Success {
		t.Fatalf("%v %+v", err, res)
	}
	if st.State != "ok" || st.MemTotalBytes == 0 || st.UptimeSeconds <= 0 || st.Warden.AuditHeadSeq != 42 || st.Warden.ToolsLoaded != 7 || st.Process.Goroutines == 0 {
		t.Fatalf("status %+v", st)
	}
	sys.State = func(context.Context) (RuntimeState, error) { return RuntimeState{}, errors.New("store locked") }
	res = callSystem(t, newGate(t, sys, policy.DefaultPolicy()), `{"operation":"get_status"}`)
	if !res.Success || !strings.Contains(string(res.Data), `"state":"degraded: store locked"`) {
		t.Fatalf("%s", res.Data)
	}
}

func TestSystemRefusesEverythingElse(t *testing.T) {
	g := newGate(t, &System{}, policy.DefaultPolicy())
	tests := []struct{ op, hint string }{
		{"execute_command", "shell"},
		{"run_script", "shell"},
		{"EXEC", "shell"},
		{"read_file", "fs_read"},
		{"list_directory", "fs_read"},
		{"get_memory_info", "get_info and get_status"},
		{"GET_INFO", "get_info and get_status"},
	}
	for _, tt := range tests {
		res := callSystem(t, g, `{"operation":"`+tt.op+`"}`)
		if res.Success || res.Error.Code != tool.CodeOperationNotSupported || !strings.Contains(res.Error.Hint, tt.hint) {
			t.Errorf("%s: %+v", tt.op, res.Error)
		}
	}
	// The seed's invalid call shape, with execution arguments, is invalid input.
	res := callSystem(t, g, `{"operation":"execute_command","arguments":{"command":"uname -a"}}`)
	if res.Error == nil || res.Error.Code != tool.CodeInvalidInput {
		t.Fatalf("%+v", res.Error)
	}
}

func TestSystemNeedsSystemInfo(t *testing.T) {
	p, err := policy.ParsePolicy("p", []byte("version: 1\ngrants: [\"fs.read:**\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	res := callSystem(t, newGate(t, &System{}, p), `{"operation":"get_info"}`)
	if res.Error == nil || res.Error.Code != tool.CodeCapabilityDenied || res.Error.Hint != "needs the grant system.info" ||
		!slices.Equal(res.Error.Missing, []string{"system.info"}) {
		t.Fatalf("%+v", res.Error)
	}
}

// BenchmarkSystemGetInfo compares a direct get_info with the same call
// through the gate (decode, schema, policy, capabilities, redaction, two
// audit events marshalled) without the durable audit write: the difference
// is the gate's overhead.
func BenchmarkSystemGetInfo(b *testing.B) {
	sys := &System{Config{Version: "bench"}}
	b.Run("direct", func(b *testing.B) {
		c := &tool.Call{Tool: "system", Args: json.RawMessage(`{"operation":"get_info"}`)}
		sys := tool.Adapt[Args](sys)
		for b.Loop() {
			if o := sys.Run(context.Background(), c); o.Err != nil {
				b.Fatal(o.Err)
			}
		}
	})
	b.Run("gate", func(b *testing.B) {
		g := newGate(b, sys, policy.DefaultPolicy())
		req := gate.Request{Tool: "system", Args: json.RawMessage(`{"operation":"get_info"}`), Principal: []string{"bench"}}
		for b.Loop() {
			res, err := g.Call(context.Background(), req)
			if err != nil || !res.Success {
				b.Fatal(err, res.Error)
			}
		}
	})
}
