package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/wardenrt/warden/runtime"
	"github.com/wardenrt/warden/store"
)

// storeMemory adapts the store to runtime.Memory (runtime may not import
// store; store may not import runtime).
type storeMemory struct{ st *store.Store }

var _ runtime.Memory = storeMemory{}

func (m storeMemory) PutMemory(ctx context.Context, ns, key, value string) error {
	return m.st.PutMemory(ctx, ns, key, value)
}

func (m storeMemory) GetMemory(ctx context.Context, ns, key string) (runtime.MemoryEntry, error) {
	e, err := m.st.GetMemory(ctx, ns, key)
	if err != nil {
		return runtime.MemoryEntry{}, notFound(err)
	}
	return memoryEntry(e), nil
}

func (m storeMemory) DeleteMemory(ctx context.Context, ns, key string) error {
	return notFound(m.st.DeleteMemory(ctx, ns, key))
}

func (m storeMemory) ListMemory(ctx context.Context, ns string, limit int) ([]runtime.MemoryEntry, error) {
	es, err := m.st.ListMemory(ctx, ns, limit)
	if err != nil {
		return nil, err
	}
	out := make([]runtime.MemoryEntry, len(es))
	for i, e := range es {
		out[i] = memoryEntry(e)
	}
	return out, nil
}

func (m storeMemory) SearchMemory(ctx context.Context, text string, ns func(string) bool, limit int) ([]runtime.MemoryHit, error) {
	hits, err := m.st.SearchMemory(ctx, store.MemoryQuery{Text: text, Namespace: ns, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]runtime.MemoryHit, len(hits))
	for i, h := range hits {
		out[i] = runtime.MemoryHit{MemoryEntry: memoryEntry(h.MemoryEntry), Score: h.Score}
	}
	return out, nil
}

func memoryEntry(e store.MemoryEntry) runtime.MemoryEntry {
	return runtime.MemoryEntry{Namespace: e.Namespace, Key: e.Key, Value: e.Value, Created: e.Created, Updated: e.Updated}
}

// notFound re-wraps the store's not-found error as runtime's.
func notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %v", runtime.ErrNotFound, err)
	}
	return err
}
