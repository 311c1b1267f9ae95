package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Runs and wasm tool pins are JSON documents stored under a caller-chosen
// name; the store only checks that they are JSON and stores them compacted.

// compactJSON checks that doc is one JSON value and compacts it.
func compactJSON(what string, doc []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, doc); err != nil {
		return nil, fmt.Errorf("%w: %s is not valid JSON: %v", ErrInvalid, what, err)
	}
	if buf.Len() == 0 {
		return nil, fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	}
	return buf.Bytes(), nil
}

// putDoc stores doc under name in bucket.
func (s *Store) putDoc(ctx context.Context, bucket []byte, kind, name string, doc json.RawMessage) error {
	if err := validName(kind, name); err != nil {
		return err
	}
	v, err := compactJSON(kind+" "+name, doc)
	if err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).Put([]byte(name), v)
	})
}

// getDoc returns a copy of the document under name in bucket.
func (s *Store) getDoc(ctx context.Context, bucket []byte, kind, name string) (json.RawMessage, error) {
	if err := validName(kind, name); err != nil {
		return nil, err
	}
	var doc json.RawMessage
	err := s.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucket).Get([]byte(name))
		if v == nil {
			return fmt.Errorf("%s %s: %w", kind, name, ErrNotFound)
		}
		doc = bytes.Clone(v)
		return nil
	})
	return doc, err
}

// PutRun creates or replaces the document of run id. Run ids are chosen by
// the caller and sort in time order (ListRuns relies on it).
func (s *Store) PutRun(ctx context.Context, id string, doc json.RawMessage) error {
	return s.putDoc(ctx, bucketRuns, "run", id, doc)
}

// Run returns the document of run id, or an error wrapping ErrNotFound.
func (s *Store) Run(ctx context.Context, id string) (json.RawMessage, error) {
	return s.getDoc(ctx, bucketRuns, "run", id)
}

// ListRuns returns run documents newest (largest id) first, at most limit
// of them (<= 0: all).
func (s *Store) ListRuns(ctx context.Context, limit int) ([]json.RawMessage, error) {
	var out []json.RawMessage
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketRuns).Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if limit > 0 && len(out) >= limit {
				break
			}
			if len(out)%256 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			out = append(out, bytes.Clone(v))
		}
		return nil
	})
	return out, err
}

// PutPin creates or replaces the pin of wasm tool name.
func (s *Store) PutPin(ctx context.Context, name string, doc json.RawMessage) error {
	return s.putDoc(ctx, bucketPins, "pin", name, doc)
}

// Pin returns the pin of wasm tool name, or an error wrapping ErrNotFound.
func (s *Store) Pin(ctx context.Context, name string) (json.RawMessage, error) {
	return s.getDoc(ctx, bucketPins, "pin", name)
}

// DeletePin removes the pin of name, or returns an error wrapping
// ErrNotFound.
func (s *Store) DeletePin(ctx context.Context, name string) error {
	if err := validName("pin", name); err != nil {
		return err
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPins)
		if b.Get([]byte(name)) == nil {
			return fmt.Errorf("pin %s: %w", name, ErrNotFound)
		}
		return b.Delete([]byte(name))
	})
}

// ListPins returns every pin by name.
func (s *Store) ListPins(ctx context.Context) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage)
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPins).ForEach(func(k, v []byte) error {
			out[string(k)] = bytes.Clone(v)
			return nil
		})
	})
	return out, err
}
