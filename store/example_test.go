package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/wardenrt/warden/store"
)

func Example() {
	dir, err := os.MkdirTemp("", "warden-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(filepath.Join(dir, "warden.db"), nil)
	if err != nil {
		log.Fatal(err) // errors.Is(err, store.ErrLocked) → exit code 75
	}
	defer s.Close()
	ctx := context.Background()

	for _, tool := range []string{"fs.read", "shell.exec"} {
		seq, err := s.AppendAudit(ctx, json.RawMessage(fmt.Sprintf(`{"run_id":"r1","tool":%q}`, tool)))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("audit record", seq)
	}
	rep, err := s.VerifyAudit(ctx)
	fmt.Println("verified:", rep.Records, "records, anchor at", rep.AnchorSeq, err)

	s.PutMemory(ctx, "notes", "deploy", "the deploy needs the staging key")
	s.PutMemory(ctx, "notes", "lunch", "sandwiches on friday")
	hits, err := s.SearchMemory(ctx, store.MemoryQuery{Text: "staging deploy"})
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range hits {
		fmt.Printf("%s/%s: %s\n", h.Namespace, h.Key, h.Value)
	}
	// Output:
	// audit record 1
	// audit record 2
	// verified: 2 records, anchor at 2 <nil>
	// notes/deploy: the deploy needs the staging key
}
