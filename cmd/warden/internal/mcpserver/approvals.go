package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/tool"
)

// ApprovalInput is the id of warden's one input request.
const ApprovalInput = "warden_approval"

// Approval bounds: how long an asked approval can be answered; how many
// may wait, in all and per session and client; and the largest arguments
// and preview shown — a call too large to show in full is not asked about.
const (
	approvalTTL           = 10 * time.Minute
	maxPendingApprovals   = 256
	maxPendingPerAsker    = 16
	maxApprovalArgsShown  = 4 << 10
	maxApprovalPreviewLen = 16 << 10
)

// multiRoundTripVersion is the first MCP protocol version in which a
// server asks for input by returning it from the call (SEP-2322); before
// it, the server sends the client an elicitation request.
const multiRoundTripVersion = "2026-07-28"

// mcpApprovals asks the person behind the MCP client to approve a call
// that a rule marks require_approval, with the gate's own approval step:
//
//   - A client on a protocol before multi-round-trip is sent an
//     elicitation request while the call waits at the approval step (at
//     most approvalTTL); its answer approves or refuses that call.
//   - With multi-round-trip, the first pass of the call stops at the
//     approval step (recorded as APPROVAL_REQUIRED) and returns the
//     elicitation as an input request; the client asks the person and
//     calls again with the answer and the request state, and the second
//     pass goes through the whole gate again. The state is a one-time
//     nonce that warden keeps with what was shown: the tool, the sha256
//     of the arguments as sent, the session, the principal, the gate (a
//     reload in between voids it) and the preview. An answer counts once,
//     within approvalTTL, for that call, if the preview is unchanged.
//
// Anything else fails closed with APPROVAL_REQUIRED: a client that cannot
// ask (no form elicitation), a call made inside the client's call, a call
// too large to show in full.
type mcpApprovals struct {
	mu      sync.Mutex
	pending map[string]pendingApproval
}

type pendingApproval struct {
	tool, argsSum, session, principal string
	gate                              *gate.Gate
	previewSum                        string
	expires                           time.Time
}

func (p pendingApproval) asker() string { return p.session + "\x00" + p.principal }

func newMCPApprovals() *mcpApprovals {
	return &mcpApprovals{pending: map[string]pendingApproval{}}
}

// mcpAsk is one pass of one tools/call, as the approver sees it.
type mcpAsk struct {
	a                      *mcpApprovals
	gate                   *gate.Gate
	tool, argsSum, session string
	principal              string
	canElicit              bool
	// legacy: the client is on a protocol before multi-round-trip; the
	// approver sends it an elicitation request itself.
	legacy bool
	conn   *mcp.ServerSession
	// On a second pass: the person's answer ("approve", "reject" or
	// "cancel") and what they were shown, or why the answer sent cannot
	// be used.
	answer    string
	shown     *pendingApproval
	answerErr error
	// Set when this pass asks.
	elicit *mcp.ElicitParams
	state  string
}

type mcpAskKey struct{}

func withMCPAsk(ctx context.Context, a *mcpAsk) context.Context {
	return context.WithValue(ctx, mcpAskKey{}, a)
}

// begin prepares a pass: a second pass takes its answer and the nonce's
// record (once). canAsk is false when the call cannot be answered by
// calling again (it bypassed the SDK's multi-round-trip handling).
func (a *mcpApprovals) begin(req *mcp.CallToolRequest, g *gate.Gate, principal, tool string, args json.RawMessage, canAsk bool) *mcpAsk {
	sum := sha256.Sum256(args)
	ask := &mcpAsk{a: a, gate: g, tool: tool, argsSum: hex.EncodeToString(sum[:]), principal: principal}
	if req.Session != nil {
		ask.session, ask.conn = req.Session.ID(), req.Session
	}
	if caps := req.ClientCapabilities(); canAsk && caps != nil && caps.Elicitation != nil &&
		(caps.Elicitation.Form != nil || caps.Elicitation.URL == nil) { // form elicitation (implied when neither is named)
		ask.canElicit = true
	}
	ask.legacy = req.ProtocolVersion() < multiRoundTripVersion
	p := req.Params
	if p.RequestState == "" && len(p.InputResponses) == 0 {
		return ask
	}
	a.mu.Lock()
	rec, ok := a.pending[p.RequestState]
	delete(a.pending, p.RequestState)
	a.mu.Unlock()
	resp, _ := p.InputResponses[ApprovalInput].(*mcp.ElicitResult)
	switch {
	case ask.legacy:
		ask.answerErr = errors.New("an answer sent with the call is not accepted on this protocol version")
	case !ok || time.Now().After(rec.expires):
		ask.answerErr = errors.New("the approval answered is unknown, expired or already used")
	case rec.tool != tool || rec.argsSum != ask.argsSum || rec.session != ask.session || rec.principal != principal:
		ask.answerErr = errors.New("the approval answered was asked for another call")
	case rec.gate != g:
		ask.answerErr = errors.New("the tools changed since the person was asked: call again to be asked again")
	case resp == nil:
		ask.answerErr = errors.New("the client sent no answer to the approval")
	default:
		ask.shown = &rec
		ask.answer = answerOf(resp)
	}
	return ask
}

// answerOf reads an elicitation result: approved only when accepted with
// approve true.
func answerOf(r *mcp.ElicitResult) string {
	switch approve, _ := r.Content["approve"].(bool); {
	case r.Action == "accept" && approve:
		return "approve"
	case r.Action == "cancel":
		return "cancel"
	}
	return "reject" // decline, or accept with approve false
}

var errNoElicitation = errors.New("the MCP client cannot ask the person (it does not support form elicitation)")

// Approve implements gate.Approver for the calls of an MCP request.
func (a *mcpApprovals) Approve(ctx context.Context, r gate.ApprovalRequest) (gate.Approval, error) {
	ask, ok := ctx.Value(mcpAskKey{}).(*mcpAsk)
	if !ok || ask.a != a {
		return gate.Approval{}, errors.New("no MCP request to ask through")
	}
	// Only the client's own call is asked about: a call a workflow or a
	// wasm tool makes inside it cannot be answered by calling again (that
	// would run the steps before it again).
	if len(r.Principal) != 1 || r.Principal[0] != ask.principal || r.Tool != ask.tool {
		return gate.Approval{}, fmt.Errorf("%s is called by %s, inside the client's call: only the client's own call can be approved through MCP", r.Tool, strings.Join(r.Principal, " → "))
	}
	if ask.answerErr != nil {
		return gate.Approval{}, ask.answerErr
	}
	preview := previewSum(r.Preview)
	by := "user via " + ask.principal
	if ask.answer != "" {
		answer, shown := ask.answer, ask.shown
		ask.answer, ask.shown = "", nil // one answer, one approval
		if shown.previewSum != preview {
			return gate.Approval{}, errors.New("the dry run's preview changed since the person was asked: call again to be asked again")
		}
		return approval(answer, by)
	}
	if !ask.canElicit {
		return gate.Approval{}, errNoElicitation
	}
	if ask.elicit != nil {
		return gate.Approval{}, errors.New("one approval per call")
	}
	params, err := approvalRequest(r)
	if err != nil {
		return gate.Approval{}, err
	}
	if ask.legacy {
		ectx, cancel := context.WithTimeout(ctx, approvalTTL)
		defer cancel()
		res, err := ask.conn.Elicit(ectx, params)
		if err != nil {
			return gate.Approval{}, fmt.Errorf("asking through the client: %w", err)
		}
		return approval(answerOf(res), by)
	}
	nonce, err := a.add(pendingApproval{tool: ask.tool, argsSum: ask.argsSum, session: ask.session, principal: ask.principal,
		gate: ask.gate, previewSum: preview, expires: time.Now().Add(approvalTTL)})
	if err != nil {
		return gate.Approval{}, err
	}
	ask.state, ask.elicit = nonce, params
	return gate.Approval{}, errors.New("the person is asked through the MCP client (elicitation); the client calls again with the answer")
}

func approval(answer, by string) (gate.Approval, error) {
	switch answer {
	case "approve":
		return gate.Approval{Approved: true, By: by}, nil
	case "cancel":
		return gate.Approval{}, gate.ErrCancelled
	}
	return gate.Approval{Approved: false, By: by}, nil
}

// add records an asked approval and returns its nonce.
func (a *mcpApprovals) add(p pendingApproval) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	mine := 0
	for k, v := range a.pending {
		switch {
		case now.After(v.expires):
			delete(a.pending, k)
		case v.asker() == p.asker():
			mine++
		}
	}
	if mine >= maxPendingPerAsker || len(a.pending) >= maxPendingApprovals {
		return "", fmt.Errorf("too many approvals are waiting for an answer (%d from this client, %d in all)", mine, len(a.pending))
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	nonce := hex.EncodeToString(b)
	a.pending[nonce] = p
	return nonce, nil
}

func previewSum(o *tool.Outcome) string {
	if o == nil {
		return ""
	}
	b, _ := json.Marshal(struct {
		Output string
		Data   any
	}{o.Output, o.Data})
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// approvalRequest is what the person is shown: who calls what, the
// redacted arguments, what it needs, the rule and the preview, all made
// safe to display (control and bidi characters escaped). A call whose
// arguments or preview are too long to show in full is not asked about:
// what is approved must be what was seen.
func approvalRequest(r gate.ApprovalRequest) (*mcp.ElicitParams, error) {
	if len(r.Args) > maxApprovalArgsShown {
		return nil, fmt.Errorf("its arguments (%d bytes) are too long to show the person in full (at most %d)", len(r.Args), maxApprovalArgsShown)
	}
	if r.Preview != nil && len(r.Preview.Output) > maxApprovalPreviewLen {
		return nil, fmt.Errorf("its preview (%d bytes) is too long to show the person in full (at most %d)", len(r.Preview.Output), maxApprovalPreviewLen)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "warden: %s wants to call %s\n", ui.Printable(strings.Join(r.Principal, " → ")), ui.Printable(r.Tool))
	fmt.Fprintf(&b, "arguments: %s\n", ui.Printable(string(r.Args)))
	if len(r.Needs) > 0 {
		fmt.Fprintf(&b, "needs: %s\n", ui.Printable(strings.Join(r.Needs, ", ")))
	}
	fmt.Fprintf(&b, "rule: %s\n", ui.Printable(r.Rule))
	if r.Preview != nil {
		fmt.Fprintf(&b, "preview:\n%s\n", ui.Printable(r.Preview.Output))
	}
	b.WriteString("Approve this call once?")
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: b.String(),
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{"type": "boolean", "title": "Approve",
					"description": fmt.Sprintf("Run %s once, with these arguments", r.Tool)},
			},
			"required": []string{"approve"},
		},
	}, nil
}
