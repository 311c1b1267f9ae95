package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Artifacts are stored by content: the key is the raw SHA-256 of the bytes,
// and the digest callers see is "sha256:" followed by its hex.

const digestPrefix = "sha256:"

// parseDigest returns the raw key of a "sha256:<64 lowercase hex>" digest.
func parseDigest(digest string) ([]byte, error) {
	h, ok := strings.CutPrefix(digest, digestPrefix)
	if !ok || !isHash(h) {
		return nil, fmt.Errorf("%w: artifact digest %q is not sha256:<64 lowercase hex digits>", ErrInvalid, digest)
	}
	return hex.DecodeString(h)
}

// PutArtifact stores data and returns its digest, "sha256:<hex>". Storing
// the same bytes again changes nothing.
func (s *Store) PutArtifact(ctx context.Context, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	digest := digestPrefix + hex.EncodeToString(sum[:])
	exists := false
	err := s.view(ctx, func(tx *bolt.Tx) error {
		exists = tx.Bucket(bucketArtifacts).Get(sum[:]) != nil
		return nil
	})
	if err != nil || exists {
		return digest, err
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketArtifacts)
		if b.Get(sum[:]) != nil {
			return nil
		}
		return b.Put(sum[:], bytes.Clone(data))
	})
	return digest, err
}

// Artifact returns the bytes stored under digest, or an error wrapping
// ErrNotFound; ErrCorrupt if they no longer hash to the digest.
func (s *Store) Artifact(ctx context.Context, digest string) ([]byte, error) {
	key, err := parseDigest(digest)
	if err != nil {
		return nil, err
	}
	var data []byte
	err = s.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketArtifacts).Get(key)
		if v == nil {
			return fmt.Errorf("artifact %s: %w", digest, ErrNotFound)
		}
		data = bytes.Clone(v)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(data); !bytes.Equal(sum[:], key) {
		return nil, corruptf(s.path, "artifact %s no longer matches its digest", digest)
	}
	return data, nil
}
