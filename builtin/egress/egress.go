// Package egress is the way out of a program's sandbox: an HTTP proxy
// (CONNECT tunnels and plain-HTTP forwarding) and TCP bridges to granted
// addresses, served by warden for one tool call. Every connection goes
// through netguard, so a program reaches exactly what the call's net
// grants name, with the http tool's rules — host names matched as the
// http tool matches them, loopback, private, link-local and metadata
// addresses only through a grant naming them, every resolved address
// checked — and every connection made or refused is recorded (Record).
//
// The listeners come from elsewhere: the sandbox launcher makes them
// inside the program's network namespace and hands them to warden (where
// there is none, warden listens on a loopback port and requires a token).
package egress

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wardenrt/warden/builtin/internal/netguard"
)

// Record is one connection a program made or was refused.
type Record struct {
	// Program is the program whose listener it came in on ("" where the
	// listener is shared).
	Program string `json:"program,omitempty"`
	// Via: "proxy" (CONNECT or plain HTTP) or "bridge" (a granted
	// address reached directly).
	Via string `json:"via"`
	// Method is CONNECT or the HTTP method forwarded (proxy only).
	Method string `json:"method,omitempty"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	// Addr is the address connected to.
	Addr string `json:"addr,omitempty"`
	// Verdict: allowed, refused (by the grants), or failed (allowed, but
	// the connection could not be made, or the request was malformed).
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
	// Sent and Received count the bytes from the program to the host and
	// back.
	Sent     int64 `json:"sent"`
	Received int64 `json:"received"`
}

// Verdicts of a Record.
const (
	Allowed = "allowed"
	Refused = "refused"
	Failed  = "failed"
)

// Options configure a Proxy.
type Options struct {
	// Dialer makes every connection (required).
	Dialer *netguard.Dialer
	// Token, when set, must come with every proxy request as
	// Proxy-Authorization (Basic, any user name, the token as password):
	// for a proxy listening where other processes can reach it.
	Token string
	// Record is called once per connection, when it ends (nil: none).
	Record func(Record)
	// HeaderTimeout bounds how long a client may take to send its request
	// head (0: 30 s).
	HeaderTimeout time.Duration
}

// Proxy serves one call's listeners.
type Proxy struct {
	o      Options
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]bool
	conns     map[net.Conn]bool
	wg        sync.WaitGroup
}

// New returns a proxy; ctx ending closes it.
func New(ctx context.Context, o Options) *Proxy {
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = 30 * time.Second
	}
	p := &Proxy{o: o, listeners: map[net.Listener]bool{}, conns: map[net.Conn]bool{}}
	p.ctx, p.cancel = context.WithCancel(ctx)
	context.AfterFunc(p.ctx, p.shut)
	return p
}

// Serve answers proxy requests on l until l or the proxy is closed. It
// returns at once; program names who the listener is for.
func (p *Proxy) Serve(l net.Listener, program string) {
	p.serve(l, func(c net.Conn) { p.proxy(c, program) })
}

// Bridge forwards every connection on l to the address to, checked
// against the grants each time, until l or the proxy is closed.
func (p *Proxy) Bridge(l net.Listener, to netip.AddrPort, program string) {
	p.serve(l, func(c net.Conn) { p.bridge(c, to, program) })
}

func (p *Proxy) serve(l net.Listener, handle func(net.Conn)) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return
	}
	p.listeners[l] = true
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				p.mu.Lock()
				delete(p.listeners, l)
				p.mu.Unlock()
				return
			}
			if !p.track(c) {
				c.Close()
				continue
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer p.untrack(c)
				handle(c)
			}()
		}
	}()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// shut closes every listener and connection.
func (p *Proxy) shut() {
	p.mu.Lock()
	p.closed = true
	for l := range p.listeners {
		l.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// Close closes every listener and connection and waits for the handlers
// (whose records are then all made).
func (p *Proxy) Close() {
	p.cancel()
	p.shut()
	p.wg.Wait()
}

func (p *Proxy) record(r Record) {
	if p.o.Record != nil {
		p.o.Record(r)
	}
}

// proxy handles one client connection: one request head, then a CONNECT
// tunnel or one forwarded plain-HTTP exchange.
func (p *Proxy) proxy(c net.Conn, program string) {
	rec := Record{Program: program, Via: "proxy"}
	_ = c.SetReadDeadline(time.Now().Add(p.o.HeaderTimeout))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			reply(c, http.StatusBadRequest, "warden proxy: not an HTTP proxy request: "+err.Error())
			rec.Verdict, rec.Reason = Failed, "not an HTTP proxy request"
			p.record(rec)
		}
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	rec.Method = req.Method
	if p.o.Token != "" && !p.authorized(req) {
		c.Write([]byte("HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"warden\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
		rec.Verdict, rec.Reason = Refused, "no valid proxy token"
		rec.Host = req.Host
		p.record(rec)
		return
	}
	var hostport string
	if req.Method == http.MethodConnect {
		hostport = req.RequestURI
	} else {
		if req.URL.Scheme != "http" || req.URL.Host == "" {
			msg := "warden proxy: send absolute http:// URLs, or CONNECT host:port for anything else (https)"
			reply(c, http.StatusBadRequest, msg)
			rec.Verdict, rec.Reason, rec.Host = Failed, "not an absolute http:// URL", req.URL.Host
			p.record(rec)
			return
		}
		hostport = req.URL.Host
		if req.URL.Port() == "" {
			hostport = net.JoinHostPort(req.URL.Hostname(), "80")
		}
	}
	host, portText, err := net.SplitHostPort(hostport)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil || port < 1 || port > 65535 {
		reply(c, http.StatusBadRequest, "warden proxy: "+strconv.Quote(hostport)+" is not host:port")
		rec.Verdict, rec.Reason, rec.Host = Failed, "not host:port", hostport
		p.record(rec)
		return
	}
	rec.Host, rec.Port = host, port
	up, ap, err := p.o.Dialer.Dial(p.ctx, "tcp", net.JoinHostPort(host, portText))
	if err != nil {
		rec.Verdict, rec.Reason = Failed, err.Error()
		status := http.StatusBadGateway
		var denied *netguard.DeniedError
		if errors.As(err, &denied) {
			rec.Verdict, status = Refused, http.StatusForbidden
		}
		reply(c, status, "warden proxy: "+err.Error())
		p.record(rec)
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)
	rec.Verdict, rec.Addr = Allowed, ap.String()
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			p.record(rec)
			return
		}
		if n := br.Buffered(); n > 0 {
			b, _ := br.Peek(n)
			w, _ := up.Write(b)
			rec.Sent += int64(w)
		}
		sent, received := pipe(c, up)
		rec.Sent += sent
		rec.Received = received
		p.record(rec)
		return
	}
	// Plain HTTP: the request in origin form, without the proxy's
	// headers, one exchange per connection; the answer as it comes.
	for _, h := range []string{"Proxy-Authorization", "Proxy-Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		req.Header.Del(h)
	}
	req.Close = true
	req.RequestURI = ""
	sentc := make(chan int64, 1)
	go func() {
		cw := &countWriter{w: up}
		_ = req.Write(cw)
		sentc <- cw.n
	}()
	received, _ := copyConn(c, up)
	// The answer is complete. A client still sending a body the server
	// did not wait for gets an end of file, not a reset that could cost
	// it the answer.
	closeWrite(c)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	up.Close()
	rec.Sent, rec.Received = <-sentc, received
	p.record(rec)
}

// authorized checks the request's Proxy-Authorization against the token.
func (p *Proxy) authorized(req *http.Request) bool {
	v := req.Header.Get("Proxy-Authorization")
	b64, ok := strings.CutPrefix(v, "Basic ")
	if !ok {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return false
	}
	_, pass, _ := strings.Cut(string(raw), ":")
	return subtle.ConstantTimeCompare([]byte(pass), []byte(p.o.Token)) == 1
}

// bridge forwards one connection to to, if the grants allow it.
func (p *Proxy) bridge(c net.Conn, to netip.AddrPort, program string) {
	rec := Record{Program: program, Via: "bridge", Host: to.Addr().String(), Port: int(to.Port())}
	up, ap, err := p.o.Dialer.Dial(p.ctx, "tcp", to.String())
	if err != nil {
		rec.Verdict, rec.Reason = Failed, err.Error()
		var denied *netguard.DeniedError
		if errors.As(err, &denied) {
			rec.Verdict = Refused
		}
		p.record(rec)
		return
	}
	if !p.track(up) {
		up.Close()
		return
	}
	defer p.untrack(up)
	rec.Verdict, rec.Addr = Allowed, ap.String()
	rec.Sent, rec.Received = pipe(c, up)
	p.record(rec)
}

// pipe copies both ways until both ends are done, closing each side's
// writing half when the other side's reading ends; it returns the bytes
// from a to b and from b to a.
func pipe(a, b net.Conn) (ab, ba int64) {
	done := make(chan int64, 1)
	go func() {
		n, _ := copyConn(b, a)
		closeWrite(b)
		done <- n
	}()
	ba, _ = copyConn(a, b)
	closeWrite(a)
	ab = <-done
	return ab, ba
}

// copyConn copies src to dst; between TCP connections the kernel splices.
func copyConn(dst, src net.Conn) (int64, error) {
	if d, ok := dst.(*net.TCPConn); ok {
		return d.ReadFrom(src)
	}
	return io.Copy(dst, src)
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}

// reply answers a proxy request that is not carried out.
func reply(c net.Conn, status int, msg string) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		status, http.StatusText(status), len(msg)+1, msg)
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
