package runtime

import "time"

func timeAt(ms int64) time.Time { return time.UnixMilli(1_700_000_000_000 + ms) }
