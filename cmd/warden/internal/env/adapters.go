package env

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/wardenrt/warden/internal/runpatch"
	"github.com/wardenrt/warden/runtime/gate"
	"github.com/wardenrt/warden/runtime/policy"
	"github.com/wardenrt/warden/runtime/wasmtool"
	"github.com/wardenrt/warden/store"
)

// lazyStore adapts the store to gate.Memory and gate.Artifacts
// (runtime may not import store; store may not import runtime). It opens the
// store on first use, so listing tools does not touch it.
type lazyStore struct{ open func() (store.Backend, error) }

// LazyStore is lazyStore, for the commands.
type LazyStore = lazyStore

// NewLazyStore adapts the store open opens, on first use.
func NewLazyStore(open func() (store.Backend, error)) LazyStore { return lazyStore{open: open} }

var (
	_ gate.Memory    = lazyStore{}
	_ gate.Artifacts = lazyStore{}
)

// PutRun records a workflow run made by the workflow_run tool.
func (m lazyStore) PutRun(ctx context.Context, id string, doc json.RawMessage) error {
	st, err := m.open()
	if err != nil {
		return err
	}
	return st.PutRun(ctx, id, doc)
}

// PatchRun records a run in parts (an agent run's steps).
func (m lazyStore) PatchRun(ctx context.Context, id string, p runpatch.Patch) error {
	st, err := m.open()
	if err != nil {
		return err
	}
	return st.PatchRun(ctx, id, p)
}

func (m lazyStore) PutArtifact(ctx context.Context, data []byte) (string, error) {
	st, err := m.open()
	if err != nil {
		return "", err
	}
	return st.PutArtifact(ctx, data)
}

func (m lazyStore) PutMemory(ctx context.Context, ns, key, value string) error {
	st, err := m.open()
	if err != nil {
		return err
	}
	return st.PutMemory(ctx, ns, key, value)
}

func (m lazyStore) GetMemory(ctx context.Context, ns, key string) (gate.MemoryEntry, error) {
	st, err := m.open()
	if err != nil {
		return gate.MemoryEntry{}, err
	}
	e, err := st.GetMemory(ctx, ns, key)
	if err != nil {
		return gate.MemoryEntry{}, NotFound(err)
	}
	return memoryEntry(e), nil
}

func (m lazyStore) DeleteMemory(ctx context.Context, ns, key string) error {
	st, err := m.open()
	if err != nil {
		return err
	}
	return NotFound(st.DeleteMemory(ctx, ns, key))
}

func (m lazyStore) ListMemory(ctx context.Context, ns string, limit int) ([]gate.MemoryEntry, error) {
	st, err := m.open()
	if err != nil {
		return nil, err
	}
	es, err := st.ListMemory(ctx, ns, limit)
	if err != nil {
		return nil, err
	}
	out := make([]gate.MemoryEntry, len(es))
	for i, e := range es {
		out[i] = memoryEntry(e)
	}
	return out, nil
}

func (m lazyStore) SearchMemory(ctx context.Context, text string, ns func(string) bool, limit int) ([]gate.MemoryHit, error) {
	st, err := m.open()
	if err != nil {
		return nil, err
	}
	hits, err := st.SearchMemory(ctx, store.MemoryQuery{Text: text, Namespace: ns, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]gate.MemoryHit, len(hits))
	for i, h := range hits {
		out[i] = gate.MemoryHit{MemoryEntry: memoryEntry(h.MemoryEntry), Score: h.Score}
	}
	return out, nil
}

func memoryEntry(e store.MemoryEntry) gate.MemoryEntry {
	return gate.MemoryEntry{Namespace: e.Namespace, Key: e.Key, Value: e.Value, Created: e.Created, Updated: e.Updated}
}

// NotFound re-wraps the store's not-found error as runtime's.
func NotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %v", gate.ErrNotFound, err)
	}
	return err
}

// The wasm tool pins live in the store's pins bucket.
var _ wasmtool.Pins = lazyStore{}

func (m lazyStore) Pin(ctx context.Context, name string) (json.RawMessage, error) {
	st, err := m.open()
	if err != nil {
		return nil, err
	}
	doc, err := st.Pin(ctx, name)
	return doc, NotFound(err)
}

func (m lazyStore) PutPin(ctx context.Context, name string, doc json.RawMessage) error {
	st, err := m.open()
	if err != nil {
		return err
	}
	return st.PutPin(ctx, name, doc)
}

func (m lazyStore) DeletePin(ctx context.Context, name string) error {
	st, err := m.open()
	if err != nil {
		return err
	}
	return NotFound(st.DeletePin(ctx, name))
}

func (m lazyStore) ListPins(ctx context.Context) (map[string]json.RawMessage, error) {
	st, err := m.open()
	if err != nil {
		return nil, err
	}
	return st.ListPins(ctx)
}

// Trust records and grants with an expiry live in the store's trust and
// grants buckets, as JSON documents.
var (
	_ policy.TrustStore = lazyStore{}
	_ gate.GrantStore   = lazyStore{}
)

func (m lazyStore) TrustRecord(ctx context.Context, path string) (policy.TrustRecord, bool, error) {
	st, err := m.open()
	if err != nil {
		return policy.TrustRecord{}, false, err
	}
	doc, err := st.Trust(ctx, TrustKey(path))
	if errors.Is(err, store.ErrNotFound) {
		return policy.TrustRecord{}, false, nil
	}
	if err != nil {
		return policy.TrustRecord{}, false, err
	}
	var r policy.TrustRecord
	if err := json.Unmarshal(doc, &r); err != nil {
		return policy.TrustRecord{}, false, fmt.Errorf("trust record of %s: %w", path, err)
	}
	return r, true, nil
}

// TrustKey is the store key of a policy file's trust record: the sha256 of
// its path (paths can be longer than a key may be).
func TrustKey(path string) string { return "sha256:" + policy.SHA256Hex([]byte(path)) }

func (m lazyStore) ListGrants(ctx context.Context) ([]gate.TimedGrant, error) {
	st, err := m.open()
	if err != nil {
		return nil, err
	}
	docs, err := st.ListGrants(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]gate.TimedGrant, 0, len(docs))
	for id, doc := range docs {
		var t gate.TimedGrant
		if err := json.Unmarshal(doc, &t); err != nil || t.ID != id {
			continue // not one of ours: never a grant
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b gate.TimedGrant) int { return a.Added.Compare(b.Added) })
	return out, nil
}

func (m lazyStore) PutGrant(ctx context.Context, t gate.TimedGrant) error {
	st, err := m.open()
	if err != nil {
		return err
	}
	doc, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return st.PutGrant(ctx, t.ID, doc)
}

func (m lazyStore) DeleteGrant(ctx context.Context, id string) error {
	st, err := m.open()
	if err != nil {
		return err
	}
	return NotFound(st.DeleteGrant(ctx, id))
}
