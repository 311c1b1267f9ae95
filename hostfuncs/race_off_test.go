//go:build !race

package hostfuncs_test

import "time"

// slack is the tolerance of "ends within deadline + slack" checks.
const slack = 250 * time.Millisecond
