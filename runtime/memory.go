package runtime

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned by the interfaces runtime declares (Memory, …)
// when the named thing does not exist.
var ErrNotFound = errors.New("not found")

// MemoryEntry is one namespaced memory entry.
type MemoryEntry struct {
	Namespace string    `json:"namespace"`
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
}

// MemoryHit is a search result.
type MemoryHit struct {
	MemoryEntry
	Score float64 `json:"score"`
}

// Memory is the memory the memory tools use. cmd/warden adapts the store to
// it; values reach it already redacted.
type Memory interface {
	PutMemory(ctx context.Context, ns, key, value string) error
	// GetMemory returns an error wrapping ErrNotFound when the entry is absent.
	GetMemory(ctx context.Context, ns, key string) (MemoryEntry, error)
	// DeleteMemory returns an error wrapping ErrNotFound when the entry is absent.
	DeleteMemory(ctx context.Context, ns, key string) error
	// ListMemory lists entries of one namespace ("" = all), at most limit (0 = all).
	ListMemory(ctx context.Context, ns string, limit int) ([]MemoryEntry, error)
	// SearchMemory ranks entries of the namespaces ns accepts (nil = all) by
	// relevance to text (BM25), best first, at most limit (0 = 10).
	SearchMemory(ctx context.Context, text string, ns func(string) bool, limit int) ([]MemoryHit, error)
}

// Artifacts keeps content-addressed blobs (old versions of modified files,
// whole tool outputs). The store satisfies it.
type Artifacts interface {
	// PutArtifact stores data and returns its digest ("sha256:<hex>").
	PutArtifact(ctx context.Context, data []byte) (string, error)
}
