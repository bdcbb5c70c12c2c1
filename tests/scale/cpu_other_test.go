//go:build !linux

package scale_test

import "time"

// cpuTime is not measured off Linux: the table's CPU column reads 0.
func cpuTime() time.Duration { return 0 }
