package mcpserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/wardenrt/warden/cmd/warden/internal/env"
	"github.com/wardenrt/warden/cmd/warden/internal/ui"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/tool"
)

// EnvMCPToken names the environment variable that holds the HTTP bearer
// token when the owner chooses it.
const EnvMCPToken = "WARDEN_MCP_TOKEN"

// minMCPTokenLen is the shortest token accepted from envMCPToken.
const minMCPTokenLen = 24

// MCPCommand is `warden mcp`.
func MCPCommand() *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "warden as an MCP server: every tool, core and wasm, for MCP clients, each call through the gate",
		Subcommands: []*cli.Command{
			{
				Name: "serve",
				Usage: "serve MCP (stdio, or streamable HTTP with --http): tools/list and tools/call as the principal mcp:<client name>, " +
					"with the policy's grants and --grant; approvals are asked of the person through the client (elicitation), " +
					"and fail closed (APPROVAL_REQUIRED) when it cannot ask; read-only resources warden://audit/… and warden://runs/…",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "http", Usage: "serve streamable HTTP at `ADDR` (host:port; port 0 picks one) instead of stdio, at path /mcp, " +
						"with a bearer token (from " + EnvMCPToken + ", or generated and printed when stderr is a terminal)"},
					&cli.BoolFlag{Name: "allow-remote", Usage: "with --http, allow an address other than loopback (plain HTTP: put a TLS proxy in front)"},
					&cli.StringSliceFlag{Name: "allow-host", Usage: "with --http, a further `NAME` clients may use in the Host header (besides localhost, 127.0.0.1, ::1 and the bound address)"},
					&cli.Int64Flag{Name: "max-request-bytes", Value: mcp.DefaultMaxRequestBodyBytes, Usage: "the largest request accepted: an HTTP request body, or one message on stdio"},
					&cli.BoolFlag{Name: "resources", Usage: "serve the audit log and the runs as read-only resources (warden://audit/…, warden://runs/…): every principal's recorded calls, to any client; each read is audited"},
					&cli.DurationFlag{Name: "reload-interval", Value: time.Second, Usage: "how often to look for wasm tools installed, approved, re-granted or removed while serving (0: never)"},
				},
				Action: env.With(func(ctx context.Context, e *env.Env) error {
					p, err := e.Policy()
					if err != nil {
						return err
					}
					mode, err := mcpApprovalMode(e.CLI().String("approve"), p)
					if err != nil {
						return err
					}
					e.SetApproval(mode)
					var srv *mcpHTTP
					if addr := e.CLI().String("http"); addr != "" {
						// Before the gate is built: the token is redacted
						// wherever it might appear.
						if srv, err = newMCPHTTP(e, addr); err != nil {
							return err
						}
						defer srv.ln.Close()
					} else if len(e.CLI().StringSlice("allow-host")) > 0 || e.CLI().Bool("allow-remote") {
						return env.UsageErr("add --http ADDR", "--allow-remote and --allow-host are for --http")
					}
					m, err := newMCPServer(e, mcpOptions{resources: e.CLI().Bool("resources")})
					if err != nil {
						return err
					}
					wctx, stop := context.WithCancel(ctx)
					if iv := e.CLI().Duration("reload-interval"); iv > 0 {
						m.watch(wctx, iv)
						// A fleet's store announces changes at once.
						fleetWatch := e.WatchFleet(wctx, func() {
							if err := m.reloadIfChanged(wctx); err != nil && wctx.Err() == nil {
								m.log.Warn("mcp: reloading after a change in the fleet's store", "err", err.Error())
							}
						})
						defer fleetWatch.Wait()
					}
					defer func() { stop(); m.close(10 * time.Second) }()
					if srv != nil {
						return srv.serve(ctx, m)
					}
					e.Logger().Info("mcp serve: stdio", "tools", m.gate.Load().Registry().Len(), "approval", string(e.Approval()))
					maxLine := e.CLI().Int64("max-request-bytes")
					if maxLine <= 0 {
						return env.UsageErr("", "--max-request-bytes must be positive")
					}
					if err := m.s.Run(ctx, &mcp.StdioTransport{MaxLineLength: int(maxLine)}); err != nil && ctx.Err() == nil {
						return env.Fail(tool.CodeInternal, env.ExitFailed, "", "mcp: %v", err)
					}
					return nil
				}),
			},
		},
	}
}

// mcpApprovalMode is --approve for mcp serve: ask (the person, through
// the client) by default, or never when the policy says never; a flag
// overrides — auto only when given on the command line, never from
// WARDEN_APPROVE, and the policy's auto does not apply: the terminal is
// not the person's, and every client would get every approval.
func mcpApprovalMode(flag string, p *policy.Policy) (tool.ApprovalMode, error) {
	if flag == "" {
		if p.Approval == tool.ApproveNever {
			return tool.ApproveNever, nil
		}
		return tool.ApproveAsk, nil
	}
	m, err := tool.ParseApprovalMode(flag)
	if err != nil {
		return "", env.UsageErr("", "--approve: %v", err)
	}
	if m == tool.ApproveAuto && os.Getenv("WARDEN_APPROVE") != "" {
		return "", env.UsageErr("unset WARDEN_APPROVE and give --approve auto on the command line",
			"mcp serve takes --approve auto only from its command line, and WARDEN_APPROVE is set")
	}
	return m, nil
}

// mcpHTTP is the streamable HTTP transport: loopback unless allowed, a
// bearer token on every request, the Host header checked (against DNS
// rebinding), browsers' requests (with an Origin header) refused, request
// bodies bounded.
type mcpHTTP struct {
	e        *env.Env
	ln       net.Listener
	url      string
	token    []byte // sha256 of the token
	hosts    []string
	maxBytes int64
}

func newMCPHTTP(e *env.Env, addr string) (*mcpHTTP, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, env.UsageErr("give host:port, e.g. --http 127.0.0.1:8731", "--http %q: %v", addr, err)
	}
	if !loopbackHost(host) && !e.CLI().Bool("allow-remote") {
		return nil, env.UsageErr("bind to 127.0.0.1, or add --allow-remote (and put a TLS proxy in front)",
			"--http %s is not a loopback address: anyone who can reach it could call warden's tools", addr)
	}
	max := e.CLI().Int64("max-request-bytes")
	if max <= 0 {
		return nil, env.UsageErr("", "--max-request-bytes must be positive")
	}
	token, generated := os.Getenv(EnvMCPToken), false
	switch {
	case token == "" && !ui.IsTerminal(e.Stderr()):
		// A generated token printed to a log that is not a terminal
		// would end up on disk.
		return nil, env.UsageErr(fmt.Sprintf("set %s to a random string of %d characters or more (e.g. openssl rand -base64 32)", EnvMCPToken, minMCPTokenLen),
			"mcp serve --http needs a bearer token: it prints a generated one only on a terminal")
	case token == "":
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		token, generated = base64.RawURLEncoding.EncodeToString(b), true
	case len(token) < minMCPTokenLen:
		return nil, env.UsageErr(fmt.Sprintf("use at least %d random characters", minMCPTokenLen), "%s is too short to be a bearer token", EnvMCPToken)
	}
	e.AddSecrets(token)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, env.UsageErr("", "--http: %v", err)
	}
	sum := sha256.Sum256([]byte(token))
	s := &mcpHTTP{e: e, ln: ln, token: sum[:], maxBytes: max, hosts: []string{"localhost", "127.0.0.1", "::1"}}
	for _, h := range e.CLI().StringSlice("allow-host") {
		s.hosts = append(s.hosts, strings.ToLower(strings.Trim(h, "[]")))
	}
	if h := hostOnly(ln.Addr().String()); !net.ParseIP(h).IsUnspecified() {
		s.hosts = append(s.hosts, h)
	}
	s.url = "http://" + ln.Addr().String() + "/mcp"
	fmt.Fprintf(e.Stderr(), "warden mcp: serving MCP (streamable HTTP) at %s\n", s.url)
	if generated {
		fmt.Fprintf(e.Stderr(), "warden mcp: bearer token: %s\n", token)
	} else {
		fmt.Fprintf(e.Stderr(), "warden mcp: bearer token from %s\n", EnvMCPToken)
	}
	if !loopbackHost(host) {
		fmt.Fprintf(e.Stderr(), "warden mcp: warning: %s is reachable beyond this machine over plain HTTP: the token crosses the network in the clear unless a TLS proxy is in front\n", addr)
	}
	return s, nil
}

// serve answers until ctx ends, then shuts down.
func (s *mcpHTTP) serve(ctx context.Context, m *mcpServer) error {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m.s }, &mcp.StreamableHTTPOptions{
		Logger:              m.log,
		SessionTimeout:      30 * time.Minute,
		MaxRequestBodyBytes: s.maxBytes,
		// guard checks the Host header against the names allowed, which
		// may include a proxy's (--allow-host).
		DisableLocalhostProtection: true,
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.guard(h))
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       2 * time.Minute,
	}
	m.log.Info("mcp serve: http", "url", s.url, "tools", m.gate.Load().Registry().Len(), "approval", string(s.e.Approval()))
	done := make(chan error, 1)
	go func() { done <- hs.Serve(s.ln) }()
	select {
	case err := <-done:
		return env.Fail(tool.CodeInternal, env.ExitFailed, "", "mcp: %v", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if hs.Shutdown(sctx) != nil {
		_ = hs.Close() // streams still open: cut them
	}
	return nil
}

// guard checks, before the MCP handler sees a request: the Host header
// names this server (DNS rebinding), no browser sent it (an Origin header:
// no web page may drive warden's tools), and the bearer token is right.
// The handler bounds the body.
func (s *mcpHTTP) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(s.hosts, strings.ToLower(hostOnly(r.Host))) {
			http.Error(w, "Forbidden: Host not allowed", http.StatusForbidden)
			return
		}
		if r.Header.Get("Origin") != "" {
			http.Error(w, "Forbidden: requests from web pages are not served", http.StatusForbidden)
			return
		}
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="warden"`)
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *mcpHTTP) authorized(r *http.Request) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], s.token) == 1
}

// hostOnly is a host[:port]'s host, without brackets.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

// loopbackHost reports whether host is localhost or a loopback IP.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
