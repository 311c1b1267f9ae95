//go:build race

package hostfuncs_test

import "time"

// slack is the tolerance of "ends within deadline + slack" checks: the race
// detector slows guests and host code several-fold.
const slack = 1500 * time.Millisecond
