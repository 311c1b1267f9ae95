package store

import (
	"context"
	"encoding/hex"

	bolt "go.etcd.io/bbolt"
)

// RunIDs returns the id of every run, oldest (smallest id) first: with
// Run, what a copy of the store into another backend reads.
func (s *Store) RunIDs(ctx context.Context) ([]string, error) {
	return s.keys(ctx, bucketRuns, func(k []byte) string { return string(k) })
}

// ArtifactDigests returns the digest of every artifact, in digest order.
func (s *Store) ArtifactDigests(ctx context.Context) ([]string, error) {
	return s.keys(ctx, bucketArtifacts, func(k []byte) string { return digestPrefix + hex.EncodeToString(k) })
}

func (s *Store) keys(ctx context.Context, bucket []byte, name func([]byte) string) ([]string, error) {
	var out []string
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if len(out)%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			out = append(out, name(k))
		}
		return nil
	})
	return out, err
}

// PutMemoryBatch upserts entries in one transaction (bulk loads): what
// PutMemory for each in turn would store, with one clock reading.
func (s *Store) PutMemoryBatch(ctx context.Context, entries []MemoryEntry) error {
	return s.putMemoryBatch(ctx, entries)
}
