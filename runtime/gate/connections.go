package gate

import (
	"context"
	"sync"

	"github.com/wardenrt/warden/runtime/tool"
)

// maxConnections caps the connections one audit record lists; the rest
// are counted.
const maxConnections = 256

type connNote struct {
	mu      sync.Mutex
	list    []tool.Connection
	dropped int
}

// NoteConnection records, for the audit record of the call running in
// ctx, a connection one of its programs made or was refused.
func NoteConnection(ctx context.Context, c tool.Connection) {
	notes, ok := notesFrom(ctx)
	if !ok {
		return
	}
	n := &notes.conns
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.list) >= maxConnections {
		n.dropped++
		return
	}
	n.list = append(n.list, c)
}

func (n *connNote) get() ([]tool.Connection, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]tool.Connection(nil), n.list...), n.dropped
}

// redactConnections redacts what a program chose (host names can carry
// a secret, as in SECRET.attacker.example).
func (g *Gate) redactConnections(cs []tool.Connection) []tool.Connection {
	for i := range cs {
		cs[i].Host = g.o.Redactor.String(cs[i].Host)
		cs[i].Reason = g.o.Redactor.String(cs[i].Reason)
	}
	return cs
}
