// Package runtimetest provides in-memory implementations of the
// interfaces package gate declares — Memory, AuditLog, Artifacts and an
// agent run store — for tests, as net/http/httptest does for servers. In
// production the store satisfies them.
package runtimetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/schedule"
)

// Memory is an in-memory gate.Memory. SearchMemory scores an entry by
// how many times its value holds the query's words (case-folded).
type Memory struct {
	mu sync.Mutex
	m  map[string]gate.MemoryEntry // ns + "\x00" + key
}

var _ gate.Memory = (*Memory)(nil)

func memKey(ns, key string) string { return ns + "\x00" + key }

// PutMemory creates or replaces an entry.
func (m *Memory) PutMemory(_ context.Context, ns, key, value string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]gate.MemoryEntry{}
	}
	now := time.Now()
	e, ok := m.m[memKey(ns, key)]
	if !ok {
		e = gate.MemoryEntry{Namespace: ns, Key: key, Created: now}
	}
	e.Value, e.Updated = value, now
	m.m[memKey(ns, key)] = e
	return nil
}

// GetMemory returns an entry or an error wrapping gate.ErrNotFound.
func (m *Memory) GetMemory(_ context.Context, ns, key string) (gate.MemoryEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[memKey(ns, key)]
	if !ok {
		return e, fmt.Errorf("%s/%s: %w", ns, key, gate.ErrNotFound)
	}
	return e, nil
}

// DeleteMemory removes an entry or returns an error wrapping
// gate.ErrNotFound.
func (m *Memory) DeleteMemory(_ context.Context, ns, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.m[memKey(ns, key)]; !ok {
		return fmt.Errorf("%s/%s: %w", ns, key, gate.ErrNotFound)
	}
	delete(m.m, memKey(ns, key))
	return nil
}

// ListMemory lists the entries of ns ("" = all) by namespace and key.
func (m *Memory) ListMemory(_ context.Context, ns string, limit int) ([]gate.MemoryEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []gate.MemoryEntry
	for _, e := range m.m {
		if ns == "" || e.Namespace == ns {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return memKey(out[i].Namespace, out[i].Key) < memKey(out[j].Namespace, out[j].Key)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// SearchMemory ranks the entries of the namespaces ns accepts.
func (m *Memory) SearchMemory(_ context.Context, text string, ns func(string) bool, limit int) ([]gate.MemoryHit, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if limit <= 0 {
		limit = 10
	}
	words := strings.Fields(strings.ToLower(text))
	var hits []gate.MemoryHit
	for _, e := range m.m {
		if ns != nil && !ns(e.Namespace) {
			continue
		}
		score := 0.0
		v := strings.ToLower(e.Value)
		for _, w := range words {
			score += float64(strings.Count(v, w))
		}
		if score > 0 {
			hits = append(hits, gate.MemoryHit{MemoryEntry: e, Score: score})
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].Score != hits[j].Score {
			return hits[i].Score > hits[j].Score
		}
		return memKey(hits[i].Namespace, hits[i].Key) < memKey(hits[j].Namespace, hits[j].Key)
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, nil
}

// Audit is an in-memory gate.AuditLog; Fail, when set, makes appends
// fail with it.
type Audit struct {
	mu   sync.Mutex
	raw  []json.RawMessage
	Fail error
}

var _ gate.AuditLog = (*Audit)(nil)

// AppendAudit keeps ev; sequence numbers start at 1.
func (a *Audit) AppendAudit(_ context.Context, ev json.RawMessage) (uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.Fail != nil {
		return 0, a.Fail
	}
	a.raw = append(a.raw, append(json.RawMessage(nil), ev...))
	return uint64(len(a.raw)), nil
}

// Events returns every event, decoded, in order.
func (a *Audit) Events() []gate.AuditEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]gate.AuditEvent, len(a.raw))
	for i, r := range a.raw {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			panic(fmt.Sprintf("runtimetest: audit event %d: %v", i+1, err))
		}
	}
	return out
}

// Event returns the event with sequence number seq, or false.
func (a *Audit) Event(seq uint64) (gate.AuditEvent, bool) {
	evs := a.Events()
	if seq == 0 || int(seq) > len(evs) {
		return gate.AuditEvent{}, false
	}
	return evs[seq-1], true
}

// Results returns the result events of tool ("" = every tool).
func (a *Audit) Results(tool string) []gate.AuditEvent {
	var out []gate.AuditEvent
	for _, e := range a.Events() {
		if e.Phase == gate.PhaseResult && (tool == "" || e.Tool == tool) {
			out = append(out, e)
		}
	}
	return out
}

// Artifacts is an in-memory gate.Artifacts.
type Artifacts struct {
	mu sync.Mutex
	m  map[string][]byte
}

var _ gate.Artifacts = (*Artifacts)(nil)

// PutArtifact keeps data under "sha256:<hex>".
func (a *Artifacts) PutArtifact(_ context.Context, data []byte) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	sum := sha256.Sum256(data)
	d := "sha256:" + hex.EncodeToString(sum[:])
	if a.m == nil {
		a.m = map[string][]byte{}
	}
	a.m[d] = append([]byte(nil), data...)
	return d, nil
}

// Get returns the artifact with digest d.
func (a *Artifacts) Get(d string) ([]byte, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.m[d]
	return b, ok
}

// Runs keeps agent run records (it has the store's PutRun).
type Runs struct {
	mu   sync.Mutex
	docs map[string]json.RawMessage
	puts int
}

// PutRun creates or replaces the record of run id.
func (r *Runs) PutRun(_ context.Context, id string, doc json.RawMessage) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.docs == nil {
		r.docs = map[string]json.RawMessage{}
	}
	r.docs[id] = append(json.RawMessage(nil), doc...)
	r.puts++
	return nil
}

// Run returns the record of run id.
func (r *Runs) Run(id string) (json.RawMessage, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.docs[id]
	return d, ok
}

// Puts is how many times a record was written.
func (r *Runs) Puts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.puts
}

// WriteFile writes content to dir/name, making its directories, or fails
// the test.
func WriteFile(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Grants is an in-memory gate.GrantStore.
type Grants struct {
	mu sync.Mutex
	m  map[string]gate.TimedGrant
}

var _ gate.GrantStore = (*Grants)(nil)

// ListGrants returns every grant, oldest first.
func (g *Grants) ListGrants(context.Context) ([]gate.TimedGrant, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]gate.TimedGrant, 0, len(g.m))
	for _, t := range g.m {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Added.Before(out[j].Added) })
	return out, nil
}

// PutGrant adds or replaces a grant.
func (g *Grants) PutGrant(_ context.Context, t gate.TimedGrant) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]gate.TimedGrant{}
	}
	g.m[t.ID] = t
	return nil
}

// DeleteGrant removes a grant (gate.ErrNotFound when absent).
func (g *Grants) DeleteGrant(_ context.Context, id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.m[id]; !ok {
		return fmt.Errorf("grant %s: %w", id, gate.ErrNotFound)
	}
	delete(g.m, id)
	return nil
}

// Jobs is an in-memory schedule.Store.
type Jobs struct {
	mu sync.Mutex
	m  map[string]schedule.Job
}

var _ schedule.Store = (*Jobs)(nil)

// ListJobs returns every job, by name.
func (s *Jobs) ListJobs(context.Context) ([]schedule.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]schedule.Job, 0, len(s.m))
	for _, j := range s.m {
		out = append(out, cloneJob(j))
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out, nil
}

// GetJob returns a job (gate.ErrNotFound when absent).
func (s *Jobs) GetJob(_ context.Context, id string) (schedule.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.m[id]
	if !ok {
		return schedule.Job{}, fmt.Errorf("job %s: %w", id, gate.ErrNotFound)
	}
	return cloneJob(j), nil
}

// CreateJob adds a job; a taken name is an error.
func (s *Jobs) CreateJob(_ context.Context, j schedule.Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]schedule.Job{}
	}
	if _, ok := s.m[j.ID]; ok {
		return fmt.Errorf("a job named %s exists", j.ID)
	}
	s.m[j.ID] = cloneJob(j)
	return nil
}

// UpdateJob changes a job atomically; fn's error leaves it as it was.
func (s *Jobs) UpdateJob(_ context.Context, id string, fn func(*schedule.Job) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.m[id]
	if !ok {
		return fmt.Errorf("job %s: %w", id, gate.ErrNotFound)
	}
	c := cloneJob(j)
	if err := fn(&c); err != nil {
		return err
	}
	s.m[id] = c
	return nil
}

// DeleteJob removes a job.
func (s *Jobs) DeleteJob(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[id]; !ok {
		return fmt.Errorf("job %s: %w", id, gate.ErrNotFound)
	}
	delete(s.m, id)
	return nil
}

// cloneJob deep-copies a job through JSON, as a store would.
func cloneJob(j schedule.Job) schedule.Job {
	b, err := json.Marshal(j)
	if err != nil {
		panic(err)
	}
	var c schedule.Job
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return c
}
