package builtin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// memAudit keeps audit events in memory: the gate's whole path without the
// durable write. Tests read the raw events to check redaction.
type memAudit struct {
	mu  sync.Mutex
	raw []string
}

func (m *memAudit) AppendAudit(_ context.Context, ev json.RawMessage) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.raw = append(m.raw, string(ev))
	return uint64(len(m.raw)), nil
}

// contains reports how many audit events hold s.
func (m *memAudit) contains(s string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.raw {
		n += strings.Count(r, s)
	}
	return n
}

// newTestGate builds a gate over tools with a policy given as YAML and the
// workspace ws (symlinks resolved).
func newTestGate(t testing.TB, policyYAML, ws string, tools ...tool.Tool) (*gate.Gate, *memAudit) {
	t.Helper()
	p, err := gate.ParsePolicy("test", []byte(policyYAML))
	if err != nil {
		t.Fatal(err)
	}
	return newTestGateWith(t, p, ws, tools...)
}

func newTestGateWith(t testing.TB, p *gate.Policy, ws string, tools ...tool.Tool) (*gate.Gate, *memAudit) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	reg := gate.NewRegistry()
	if err := reg.Register(tools...); err != nil {
		t.Fatal(err)
	}
	audit := &memAudit{}
	g, err := gate.NewGate(gate.GateOptions{Registry: reg, Policy: p, Workspace: ws, Audit: audit, Approval: tool.ApproveAuto})
	if err != nil {
		t.Fatal(err)
	}
	return g, audit
}

// callTool calls a tool through the gate.
func callTool(t testing.TB, g *gate.Gate, tool, args string) tool.Result {
	t.Helper()
	return callToolReq(t, g, gate.Request{Tool: tool, Args: json.RawMessage(args), Principal: []string{"test"}})
}

func callToolReq(t testing.TB, g *gate.Gate, req gate.Request) tool.Result {
	t.Helper()
	res, err := g.Call(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// treeChecksum hashes every path, mode, link target and file content under
// dir, so a test can show a dry run changed nothing.
func treeChecksum(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		io.WriteString(h, rel+"\x00"+info.Mode().String()+"\x00")
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			io.WriteString(h, target)
		case info.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
		}
		io.WriteString(h, "\x00")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// assertNoSecret fails if secret appears in the result or the audit events.
func assertNoSecret(t testing.TB, res tool.Result, audit *memAudit, secret string) {
	t.Helper()
	blob, _ := json.Marshal(res)
	if strings.Contains(string(blob), secret) {
		t.Errorf("secret in the result envelope: %s", blob)
	}
	if n := audit.contains(secret); n > 0 {
		t.Errorf("secret in %d audit events", n)
	}
}
