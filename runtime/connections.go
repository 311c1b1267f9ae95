package runtime

import (
	"context"
	"sync"
)

// Connection is one network connection a program started by a call made,
// or was refused, through warden's egress proxy or a bridge to a granted
// address. The audit record of the call's result lists them.
type Connection struct {
	// Program is the program that made it, where known.
	Program string `json:"program,omitempty"`
	// Via: "proxy" or "bridge".
	Via    string `json:"via"`
	Method string `json:"method,omitempty"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	// Addr is the address connected to (allowed connections).
	Addr string `json:"addr,omitempty"`
	// Verdict: allowed, refused (by the grants) or failed.
	Verdict  string `json:"verdict"`
	Reason   string `json:"reason,omitempty"`
	Sent     int64  `json:"sent"`
	Received int64  `json:"received"`
}

// maxConnections caps the connections one audit record lists; the rest
// are counted.
const maxConnections = 256

type connNote struct {
	mu      sync.Mutex
	list    []Connection
	dropped int
}

type connNoteKey struct{}

// NoteConnection records, for the audit record of the call running in
// ctx, a connection one of its programs made or was refused.
func NoteConnection(ctx context.Context, c Connection) {
	n, ok := ctx.Value(connNoteKey{}).(*connNote)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.list) >= maxConnections {
		n.dropped++
		return
	}
	n.list = append(n.list, c)
}

func withConnNote(ctx context.Context) (context.Context, *connNote) {
	n := &connNote{}
	return context.WithValue(ctx, connNoteKey{}, n), n
}

func (n *connNote) get() ([]Connection, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Connection(nil), n.list...), n.dropped
}

// redactConnections redacts what a program chose (host names can carry
// a secret, as in SECRET.attacker.example).
func (g *Gate) redactConnections(cs []Connection) []Connection {
	for i := range cs {
		cs[i].Host = g.o.Redactor.String(cs[i].Host)
		cs[i].Reason = g.o.Redactor.String(cs[i].Reason)
	}
	return cs
}
