//go:build !unix

package main

import (
	"io"
	"os"
	"time"
)

// watchdog: there is none here. Without process groups to hold and
// signals to send, CMD is stopped by leases alone, as its session ends
// (see supervise): a leases process that is stopped or starved stops CMD
// late, and one that is killed leaves CMD running without the lease,
// which expires. The fence is the answer to both.
type watchdog struct{}

func startWatchdog(time.Duration, io.Writer) (*watchdog, error) { return nil, nil }

func (*watchdog) leader() *os.Process     { return nil }
func (*watchdog) follow(*deadlines) error { return nil }
func (*watchdog) stop()                   {}
