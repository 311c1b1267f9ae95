package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wardenrt/warden/store"
)

// Published is a file published to the fleet.
type Published struct {
	Name      string    `json:"name"`
	SHA256    string    `json:"sha256"`
	Data      []byte    `json:"-"`
	Published time.Time `json:"published"`
	By        string    `json:"by"`
}

// Publish stores data under name for every host of the fleet.
func (s *Store) Publish(ctx context.Context, name string, data []byte) (Published, error) {
	if err := store.ValidName("published file", name); err != nil {
		return Published{}, err
	}
	sum := sha256.Sum256(data)
	p := Published{Name: name, SHA256: hex.EncodeToString(sum[:]), Data: data, By: s.host}
	err := s.do(ctx, "publishing "+name, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `INSERT INTO warden.published (name, sha256, data, by_host) VALUES ($1, $2, $3, $4)
			ON CONFLICT (name) DO UPDATE SET sha256 = EXCLUDED.sha256, data = EXCLUDED.data, by_host = EXCLUDED.by_host, published = clock_timestamp()
			RETURNING published`, name, p.SHA256, data, s.host).Scan(&p.Published)
	})
	return p, err
}

// PublishedFile returns the file published under name, or an error
// wrapping store.ErrNotFound.
func (s *Store) PublishedFile(ctx context.Context, name string) (Published, error) {
	p := Published{Name: name}
	err := s.do(ctx, "reading "+name, func(ctx context.Context) error {
		err := s.pool.QueryRow(ctx, `SELECT sha256, data, published, by_host FROM warden.published WHERE name = $1`, name).
			Scan(&p.SHA256, &p.Data, &p.Published, &p.By)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("published %s: %w", name, store.ErrNotFound)
		}
		return err
	})
	if err == nil {
		if sum := sha256.Sum256(p.Data); hex.EncodeToString(sum[:]) != p.SHA256 {
			return p, s.corruptf("the published %s does not match its sha256", name)
		}
	}
	return p, err
}

// Unpublish removes the file published under name, or returns an error
// wrapping store.ErrNotFound.
func (s *Store) Unpublish(ctx context.Context, name string) error {
	return s.do(ctx, "unpublishing "+name, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `DELETE FROM warden.published WHERE name = $1`, name)
		if err == nil && tag.RowsAffected() == 0 {
			return fmt.Errorf("published %s: %w", name, store.ErrNotFound)
		}
		return err
	})
}

// Watch calls fn with the table that changed ("pins", "trust", "grants",
// "published") whenever any host changes one, until ctx ends. It holds a
// connection of its own LISTENing on warden_changes; when that connection
// is lost it connects again (with a backoff) and calls fn("") — changes
// made meanwhile were missed, so look at everything. fn runs on Watch's
// goroutine.
func (s *Store) Watch(ctx context.Context, fn func(table string)) error {
	backoff := 100 * time.Millisecond
	first := true
	for ctx.Err() == nil {
		err := s.listen(ctx, func() {
			if !first {
				fn("")
			}
			first = false
			backoff = 100 * time.Millisecond
		}, fn)
		if ctx.Err() != nil {
			break
		}
		_ = err // the connection was lost: connect again
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
	return ctx.Err()
}

func (s *Store) listen(ctx context.Context, connected func(), fn func(string)) error {
	cctx, cancel := s.opCtx(ctx)
	conn, err := s.pool.Acquire(cctx)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `LISTEN warden_changes`); err != nil {
		conn.Conn().Close(context.Background())
		return err
	}
	connected()
	for {
		var n *pgconn.Notification
		n, err = conn.Conn().WaitForNotification(ctx)
		if err != nil {
			// Cancelled or broken: never hand this connection back
			// LISTENing.
			conn.Conn().Close(context.Background())
			return err
		}
		fn(n.Payload)
	}
}
