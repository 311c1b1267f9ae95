// Package tooltest holds what the tests of every tool family share: a gate
// over the tools under test with an in-memory audit log
// (runtimetest.Audit), calls through it, checks of their results, and the
// fixtures more than one family uses (workspaces, files, git
// repositories). It is imported by tests only.
package tooltest

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
	"testing"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/runtimetest"
	"github.com/wardenrt/warden/runtime/tool"
)

// Canary is a token-shaped secret (a GitHub personal access token) the
// tests plant to check that nothing shows it. It is written in two parts
// so that this file, which is not a test file, holds no secret-shaped
// literal (the redaction precision corpus reads every such file).
const Canary = "ghp_" + "0123456789abcdefghijABCDEFGHIJ012345"

// Gate builds a gate over tools with a policy given as YAML and the
// workspace ws (symlinks resolved); approvals are given automatically.
func Gate(t testing.TB, policyYAML, ws string, tools ...tool.Tool) (*gate.Gate, *runtimetest.Audit) {
	t.Helper()
	p, err := policy.ParsePolicy("test", []byte(policyYAML))
	if err != nil {
		t.Fatal(err)
	}
	return GateWith(t, p, ws, tools...)
}

// GateWith is Gate with a parsed policy.
func GateWith(t testing.TB, p *policy.Policy, ws string, tools ...tool.Tool) (*gate.Gate, *runtimetest.Audit) {
	t.Helper()
	ws, err := filepath.EvalSymlinks(ws)
	if err != nil {
		t.Fatal(err)
	}
	reg := gate.NewRegistry()
	if err := reg.Register(tools...); err != nil {
		t.Fatal(err)
	}
	audit := &runtimetest.Audit{}
	g, err := gate.NewGate(gate.GateOptions{Registry: reg, Policy: p, Workspace: ws, Audit: audit, Approval: tool.ApproveAuto})
	if err != nil {
		t.Fatal(err)
	}
	return g, audit
}

// Call calls a tool through the gate, as principal "test".
func Call(t testing.TB, g *gate.Gate, tool, args string) tool.Result {
	t.Helper()
	return CallReq(t, g, gate.Request{Tool: tool, Args: json.RawMessage(args), Principal: []string{"test"}})
}

// CallReq makes a request through the gate.
func CallReq(t testing.TB, g *gate.Gate, req gate.Request) tool.Result {
	t.Helper()
	res, err := g.Call(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// JSON marshals v (a call's arguments) to a string.
func JSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Events returns the audit log's events as the gate wrote them (JSON).
func Events(a *runtimetest.Audit) []string {
	evs := a.Events()
	out := make([]string, len(evs))
	for i, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			panic(err)
		}
		out[i] = string(b)
	}
	return out
}

// Count reports how many times the audit log's events hold s.
func Count(a *runtimetest.Audit, s string) int {
	n := 0
	for _, r := range Events(a) {
		n += strings.Count(r, s)
	}
	return n
}

// AssertNoSecret fails if secret appears in the result or the audit events.
func AssertNoSecret(t testing.TB, res tool.Result, audit *runtimetest.Audit, secret string) {
	t.Helper()
	blob, _ := json.Marshal(res)
	if strings.Contains(string(blob), secret) {
		t.Errorf("secret in the result envelope: %s", blob)
	}
	if n := Count(audit, secret); n > 0 {
		t.Errorf("secret in %d audit events", n)
	}
}

// TreeChecksum hashes every path, mode, link target and file content under
// dir, so a test can show a dry run changed nothing.
func TreeChecksum(t testing.TB, dir string) string {
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

// WantOK fails the test unless the call succeeded.
func WantOK(t testing.TB, res tool.Result) {
	t.Helper()
	if !res.Success {
		t.Fatalf("%s failed: %+v\noutput: %s", res.Tool, res.Error, res.Output)
	}
}

// WantCode fails the test unless the call failed with code, with a
// message and — unless the code is a denial — a hint.
func WantCode(t testing.TB, res tool.Result, code tool.Code) {
	t.Helper()
	if res.Success || res.Error == nil || res.Error.Code != code {
		t.Fatalf("%s: want %s, got success=%v error=%+v output=%q", res.Tool, code, res.Success, res.Error, res.Output)
	}
	if res.Error.Message == "" || (res.Error.Hint == "" && !code.Denial()) {
		t.Errorf("%s: %s without a message or a hint: %+v", res.Tool, code, res.Error)
	}
}

// Expect checks a call's outcome: success when code is "", else a failure
// with code, with a hint unless the code is INVALID_INPUT.
func Expect(t testing.TB, res tool.Result, code tool.Code) {
	t.Helper()
	if code == "" {
		if !res.Success {
			t.Fatalf("want success, got %+v", res.Error)
		}
		return
	}
	if res.Success || res.Error == nil || res.Error.Code != code {
		t.Fatalf("want %s, got success=%v error=%+v output=%q", code, res.Success, res.Error, res.Output)
	}
	if res.Error.Hint == "" && code != tool.CodeInvalidInput {
		t.Errorf("%s without a hint: %+v", code, res.Error)
	}
}

// Code is the result's error code, "" on success.
func Code(res tool.Result) tool.Code {
	if res.Error == nil {
		return ""
	}
	return res.Error.Code
}

// Decode unmarshals the result's data into a T.
func Decode[T any](t testing.TB, res tool.Result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(res.Data, &v); err != nil {
		t.Fatalf("data %s: %v", res.Data, err)
	}
	return v
}

// WS returns a fresh workspace, symlinks resolved.
func WS(t testing.TB) string {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// WriteFile writes content to path with exactly mode (whatever the umask),
// making its directories.
func WriteFile(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// ReadFile returns the content of path.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
