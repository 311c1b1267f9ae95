package env

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/wardenrt/warden/runtime/schedule"
)

var _ schedule.Store = lazyStore{}

func (m lazyStore) ListJobs(ctx context.Context) ([]schedule.Job, error) {
	st, err := m.open()
	if err != nil {
		return nil, err
	}
	docs, err := st.ListJobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]schedule.Job, 0, len(docs))
	for _, id := range slices.Sorted(maps.Keys(docs)) {
		var j schedule.Job
		if err := json.Unmarshal(docs[id], &j); err != nil || j.ID != id {
			continue
		}
		out = append(out, j)
	}
	return out, nil
}

func (m lazyStore) GetJob(ctx context.Context, id string) (schedule.Job, error) {
	st, err := m.open()
	if err != nil {
		return schedule.Job{}, err
	}
	doc, err := st.Job(ctx, id)
	if err != nil {
		return schedule.Job{}, NotFound(err)
	}
	var j schedule.Job
	if err := json.Unmarshal(doc, &j); err != nil {
		return schedule.Job{}, fmt.Errorf("job %s: %w", id, err)
	}
	return j, nil
}

func (m lazyStore) CreateJob(ctx context.Context, j schedule.Job) error {
	st, err := m.open()
	if err != nil {
		return err
	}
	doc, err := json.Marshal(j)
	if err != nil {
		return err
	}
	return st.CreateJob(ctx, j.ID, doc)
}

func (m lazyStore) UpdateJob(ctx context.Context, id string, fn func(*schedule.Job) error) error {
	st, err := m.open()
	if err != nil {
		return err
	}
	return NotFound(st.UpdateJob(ctx, id, func(doc json.RawMessage) (json.RawMessage, error) {
		var j schedule.Job
		if err := json.Unmarshal(doc, &j); err != nil {
			return nil, fmt.Errorf("job %s: %w", id, err)
		}
		if err := fn(&j); err != nil {
			return nil, err
		}
		return json.Marshal(j)
	}))
}

func (m lazyStore) DeleteJob(ctx context.Context, id string) error {
	st, err := m.open()
	if err != nil {
		return err
	}
	return NotFound(st.DeleteJob(ctx, id))
}
