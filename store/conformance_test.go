package store_test

import (
	"testing"

	"github.com/wardenrt/warden/store"
	"github.com/wardenrt/warden/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend {
		return storetest.Open(t, nil)
	})
}

// The contract holds whether the file stays open between operations or is
// reopened for each one.
func TestConformanceNoLinger(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend {
		return storetest.Open(t, &store.Options{Linger: -1})
	})
}
