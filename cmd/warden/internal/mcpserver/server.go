package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/runs"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
	"github.com/wardenrt/warden/store"
)

// mcpServer is warden behind an MCP server: every tool of the registry,
// each call through the gate as mcp:<client name>; approvals asked of the
// person through the client (elicitation); optional read-only resources
// over the audit log and the runs; and the tool list kept in step with the
// wasm modules installed, approved, re-granted or removed while it serves.
type mcpServer struct {
	e   *env.Env
	s   *mcp.Server
	log *slog.Logger
	// gate is the current gate; a reload swaps in one built on the new
	// registry (calls in flight finish on the one they started with).
	gate atomic.Pointer[gate.Gate]

	reloadMu sync.Mutex // one reload at a time; guards print
	print    string     // what the wasm tools were loaded from

	mu     sync.Mutex           // guards listed
	listed map[string]tool.Spec // the tools as the server lists them

	approvals *mcpApprovals
	calls     sync.WaitGroup // tools/call handlers in flight
	watching  sync.WaitGroup // the watcher

	vaultMu sync.Mutex
	vaults  map[*mcp.ServerSession]*tool.Vault // each session's masked secrets
}

// vault returns a session's vault: made at its first call, dropped when
// the session ends. A mask goes back only within the session it came
// from.
func (m *mcpServer) vault(ss *mcp.ServerSession) *tool.Vault {
	if ss == nil {
		return tool.NewVault()
	}
	m.vaultMu.Lock()
	defer m.vaultMu.Unlock()
	if v, ok := m.vaults[ss]; ok {
		return v
	}
	if m.vaults == nil {
		m.vaults = map[*mcp.ServerSession]*tool.Vault{}
	}
	v := tool.NewVault()
	m.vaults[ss] = v
	go func() {
		_ = ss.Wait()
		m.vaultMu.Lock()
		delete(m.vaults, ss)
		m.vaultMu.Unlock()
	}()
	return v
}

// mcpOptions are the server's settings from the command line.
type mcpOptions struct {
	// resources serves warden://audit/… and warden://runs/… (--resources).
	resources bool
}

// newMCPServer builds the server over the gate e.gate() builds, with e's
// approver asking through the MCP client.
func newMCPServer(e *env.Env, o mcpOptions) (*mcpServer, error) {
	m := &mcpServer{e: e, log: e.Logger(), listed: map[string]tool.Spec{}, approvals: newMCPApprovals()}
	if e.Approval() == tool.ApproveAsk {
		e.SetApprover(m.approvals)
	}
	// The fingerprint first: a module changed while the gate is being
	// built is then seen by the first look.
	p, err := m.toolsPrint(e.Context())
	if err != nil {
		return nil, env.StoreFailure(err)
	}
	m.print = p
	g, err := e.Gate()
	if err != nil {
		return nil, err
	}
	m.gate.Store(g)
	m.s = mcp.NewServer(&mcp.Implementation{Name: "warden", Version: env.Version()}, &mcp.ServerOptions{
		Instructions: "warden runs each tool call through its gate: the policy's grants, approvals and a tamper-evident audit log. " +
			"A failed call is a result with isError, its code and a hint.",
		Logger: m.log,
	})
	m.mu.Lock()
	m.sync(g.Registry())
	m.mu.Unlock()
	if o.resources {
		m.addResources()
	}
	m.s.AddReceivingMiddleware(m.unlisted)
	return m, nil
}

// close stops the watcher and waits (a bounded while) for the calls in
// flight, before the store and the wasm host are closed.
func (m *mcpServer) close(wait time.Duration) {
	m.watching.Wait()
	done := make(chan struct{})
	go func() { m.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(wait):
		m.log.Warn("mcp: calls still running at shutdown")
	}
}

// unlisted handles a tools/call of a name the server does not list: an
// alias of a listed tool (run → shell) is passed on under the tool's own
// name, so approvals work as for the tool; any other name goes through the
// gate too, instead of the SDK's protocol error, so the client gets
// UNKNOWN_TOOL with a hint and the attempt is on the audit log.
func (m *mcpServer) unlisted(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		call, ok := req.(*mcp.CallToolRequest)
		if !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		name := call.Params.Name
		if t, ok := m.gate.Load().Registry().Lookup(name); ok {
			name = t.Spec().Name
		}
		m.mu.Lock()
		_, listed := m.listed[name]
		m.mu.Unlock()
		if listed {
			call.Params.Name = name
			return next(ctx, method, req)
		}
		return m.call(ctx, call.Params.Name, call, false)
	}
}

// sync makes the listed tools those of reg: removed ones go, new or
// changed ones are (re)added. The SDK announces each change to the
// connected clients (notifications/tools/list_changed). m.mu is held.
func (m *mcpServer) sync(reg *gate.Registry) (added, removed []string) {
	now := map[string]tool.Spec{}
	for _, spec := range reg.Specs() {
		now[spec.Name] = spec
	}
	for name := range m.listed {
		if _, ok := now[name]; !ok {
			removed = append(removed, name)
			delete(m.listed, name)
		}
	}
	if len(removed) > 0 {
		m.s.RemoveTools(removed...)
	}
	for name, spec := range now {
		if old, ok := m.listed[name]; ok && sameListing(old, spec) {
			continue
		}
		if err := m.addTool(name, spec); err != nil {
			// The SDK refuses a schema warden accepted: the tool is
			// not listed (a call of it still reaches the gate).
			m.log.Warn("mcp: tool not listed", "tool", name, "err", err.Error())
			delete(m.listed, name)
			continue
		}
		m.listed[name] = spec
		added = append(added, name)
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}

// addTool lists one tool; the SDK panics on a schema it does not accept.
func (m *mcpServer) addTool(name string, spec tool.Spec) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	m.s.AddTool(&mcp.Tool{Name: name, Description: spec.Description, InputSchema: json.RawMessage(spec.InputSchema)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return m.call(ctx, name, req, true)
		})
	return nil
}

func sameListing(a, b tool.Spec) bool {
	return a.Description == b.Description && string(a.InputSchema) == string(b.InputSchema)
}

// call is one tools/call: a gate call as mcp:<client>. A tool's failure is
// a result with isError (the model sees it, with the code and hint); only a
// runtime failure (the store) is a protocol error. A call that needs an
// approval the client can ask for returns an elicitation instead when
// canAsk (the call came through the SDK's multi-round-trip handling; see
// mcpApprovals).
func (m *mcpServer) call(ctx context.Context, name string, req *mcp.CallToolRequest, canAsk bool) (*mcp.CallToolResult, error) {
	m.calls.Add(1)
	defer m.calls.Done()
	principal := "mcp:" + mcpClientName(req)
	args := req.Params.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	g := m.gate.Load()
	ask := m.approvals.begin(req, g, principal, name, args, canAsk)
	res, err := g.Call(withMCPAsk(ctx, ask), gate.Request{Tool: name, Args: args, Principal: []string{principal}, Vault: m.vault(req.Session)})
	if err != nil {
		return nil, err
	}
	if ask.elicit != nil {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{ApprovalInput: ask.elicit},
			RequestState:  ask.state,
		}, nil
	}
	text := res.Output
	res.Error = ui.MCPError(res.Error)
	if res.Error != nil {
		text = fmt.Sprintf("%s: %s", res.Error.Code, res.Error.Message)
		if res.Error.Hint != "" {
			text += " (" + res.Error.Hint + ")"
		}
	}
	text = withWarnings(text, res.Warnings)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: res,
		IsError:           !res.Success,
	}, nil
}

// MCPWarningsHeader separates a result's warnings from its output in the
// text content.
const MCPWarningsHeader = "--- warden warnings ---"

// withWarnings appends a result's warnings to its text content, after the
// output and a line of their own, one a line: a client that passes only
// the text to its model (not the structured content) must still say that
// the output was altered ("secrets masked: …").
func withWarnings(text string, warnings []string) string {
	if len(warnings) == 0 {
		return text
	}
	var b strings.Builder
	b.WriteString(text)
	if text != "" && !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	if text != "" {
		b.WriteByte('\n')
	}
	b.WriteString(MCPWarningsHeader)
	for _, w := range warnings {
		b.WriteString("\nwarning: ")
		b.WriteString(w)
	}
	b.WriteByte('\n')
	return b.String()
}

// mcpClientName is the client's self-chosen name (from the request, or
// the session's initialization), made safe for the audit log.
func mcpClientName(req interface{ ClientInfo() *mcp.Implementation }) string {
	if ci := req.ClientInfo(); ci != nil {
		return principalName(ci.Name)
	}
	return "unknown"
}

// principalName keeps a client's self-chosen name safe for the audit log:
// letters, digits, . _ -, at most 64.
func principalName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 64 {
			break
		}
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "unknown"
	}
	return b.String()
}

// --- keeping the tool list in step with the wasm modules -------------------

// toolsPrint fingerprints what the wasm tools are loaded from: the files
// of <home>/tools (names, sizes, times) and the pins (approvals and
// grants) in the store.
func (m *mcpServer) toolsPrint(ctx context.Context) (string, error) {
	h := sha256.New()
	dir := filepath.Join(m.e.Home(), "tools")
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return "", err
	}
	for _, d := range ents {
		fi, err := d.Info()
		if err != nil {
			continue // removed meanwhile: the next look sees it gone
		}
		fmt.Fprintf(h, "%s %d %d %v\n", d.Name(), fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
	}
	st, err := m.e.Store()
	if err != nil {
		return "", err
	}
	pins, err := st.ListPins(ctx)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(pins))
	for n := range pins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(h, "pin %s %x\n", n, sha256.Sum256(pins[n]))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// watch reloads the tools whenever their fingerprint changes, every
// interval, until ctx ends. Wait for it with m.watching.
func (m *mcpServer) watch(ctx context.Context, interval time.Duration) {
	m.watching.Add(1)
	go func() {
		defer m.watching.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := m.reloadIfChanged(ctx); err != nil && ctx.Err() == nil {
					m.log.Warn("mcp: looking for changed wasm tools", "err", err.Error())
				}
			}
		}
	}()
}

// reloadIfChanged rebuilds the registry and the gate when the wasm tools'
// files or pins changed: the new gate takes the next calls (a revoked
// grant or a removed module counts from then on), then the tool list
// changes and the clients are told. A registry that cannot be loaded
// (the store locked or damaged) fails closed: the core tools only, until a
// later look succeeds. Calls are not held up meanwhile: only the swap is
// done under m.mu.
func (m *mcpServer) reloadIfChanged(ctx context.Context) error {
	m.reloadMu.Lock()
	defer m.reloadMu.Unlock()
	lookCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	p, err := m.toolsPrint(lookCtx)
	cancel()
	if err != nil {
		return err
	}
	if p == m.print {
		return nil
	}
	reg, rerr := m.e.ReloadRegistry()
	if rerr != nil {
		m.log.Error("mcp: wasm tools not reloaded; serving the core tools only", "err", rerr.Error())
		if reg, err = m.e.CoreRegistry(); err != nil {
			return err
		}
		p = "" // look again next time
	}
	// The same policy, grants and approvals as at start: only the tools
	// change.
	g, err := m.gate.Load().WithRegistry(reg)
	if err != nil {
		return err
	}
	m.print = p
	m.gate.Store(g)
	m.mu.Lock()
	added, removed := m.sync(reg)
	m.mu.Unlock()
	m.log.Info("mcp: wasm tools reloaded", "added_or_changed", strings.Join(added, ","), "removed", strings.Join(removed, ","))
	return rerr
}

// --- read-only resources ---------------------------------------------------

// Resource limits.
const (
	mcpRecentAudit = 50
	mcpRecentRuns  = 50
)

// addResources serves the audit log and the runs, read-only:
// warden://audit/recent, warden://audit/{seq}, warden://runs and
// warden://runs/{id}. Everything in them was redacted before it was
// stored, but they hold what every principal's calls took and returned,
// so they are served only with --resources, and each read is audited.
func (m *mcpServer) addResources() {
	const js = "application/json"
	m.s.AddResource(&mcp.Resource{URI: "warden://audit/recent", Name: "audit-recent", MIMEType: js,
		Description: fmt.Sprintf("the last %d audit records (hash-chained; verify with `warden audit verify`)", mcpRecentAudit)},
		m.readResource(func(ctx context.Context, st store.Backend, _ string) (any, error) {
			s, err := st.Stats(ctx)
			if err != nil {
				return nil, err
			}
			after := uint64(0)
			if s.AuditHeadSeq > mcpRecentAudit {
				after = s.AuditHeadSeq - mcpRecentAudit
			}
			recs, err := st.ListAudit(ctx, store.AuditFilter{AfterSeq: after})
			if recs == nil {
				recs = []store.AuditRecord{}
			}
			return recs, err
		}))
	m.s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "warden://audit/{seq}", Name: "audit-record", MIMEType: js,
		Description: "one audit record by its sequence number"},
		m.readResource(func(ctx context.Context, st store.Backend, uri string) (any, error) {
			seq, err := strconv.ParseUint(strings.TrimPrefix(uri, "warden://audit/"), 10, 64)
			if err != nil {
				return nil, mcp.ResourceNotFoundError(uri)
			}
			return st.AuditRecord(ctx, seq)
		}))
	m.s.AddResource(&mcp.Resource{URI: "warden://runs", Name: "runs", MIMEType: js,
		Description: fmt.Sprintf("the last %d agent and workflow runs: id, kind, status, start, steps, task", mcpRecentRuns)},
		m.readResource(func(ctx context.Context, st store.Backend, _ string) (any, error) {
			docs, err := st.ListRuns(ctx, mcpRecentRuns)
			out := make([]runs.RunSummary, 0, len(docs))
			for _, d := range docs {
				var r runs.RunSummary
				_ = json.Unmarshal(d, &r)
				out = append(out, r)
			}
			return out, err
		}))
	m.s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "warden://runs/{id}", Name: "run", MIMEType: js,
		Description: "one run's record, as `warden runs show ID --json` prints it"},
		m.readResource(func(ctx context.Context, st store.Backend, uri string) (any, error) {
			id := strings.TrimPrefix(uri, "warden://runs/")
			if id == "" || strings.ContainsAny(id, "/?#") {
				return nil, mcp.ResourceNotFoundError(uri)
			}
			return st.Run(ctx, id)
		}))
}

// readResource adapts a store read to a resource handler: the value as
// indented JSON; a record that does not exist is "resource not found".
func (m *mcpServer) readResource(read func(ctx context.Context, st store.Backend, uri string) (any, error)) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		if err := m.e.AuditAs(ctx, []string{"mcp:" + mcpClientName(req)}, "read", "mcp_resource", map[string]string{"uri": uri}); err != nil {
			return nil, err
		}
		st, err := m.e.Store()
		if err != nil {
			return nil, err
		}
		v, err := read(ctx, st, uri)
		if errors.Is(err, store.ErrNotFound) {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		if err != nil {
			return nil, err
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
	}
}
