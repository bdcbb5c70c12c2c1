package main

import (
	"fmt"
	"strings"
)

// mainUsage is leases -h: the commands, where the leases are, and the
// exit statuses.
func mainUsage() string {
	var stores strings.Builder
	for _, b := range backends {
		fmt.Fprintf(&stores, "  %s\n      %s\n", b.synopsis(), b.help)
	}
	return `Usage: leases COMMAND [RESOURCE...] [flags] [-- CMD ARG...]

Look at and operate leases where they are kept, always on the store's own
clock: no caller says what time it is.

Commands:
  holders [RESOURCE...]                   who holds what, and until when
                                          (every live lease when none is named)
  acquire RESOURCE --holder NAME --ttl D  take a lease, print it
  renew   RESOURCE --holder NAME --epoch N --ttl D
                                          extend a lease you hold
  release RESOURCE --holder NAME --epoch N
                                          end a lease, also someone else's
                                          stuck one (see leases release -h)
  run     RESOURCE [--holder NAME] [--ttl D] [--wait] -- CMD [ARG...]
                                          run CMD under the lease, stop it
                                          when the lease ends

Where the leases are, one of:
` + stores.String() + `  or, when no flag says, the environment: ` + envExamples() + `
Every command takes --timeout D, the bound on each call to the store
(default ` + DefaultTimeout.String() + `), and -h for its own flags.

` + exitStatuses + `
More, with examples: docs/operators.md.
`
}

// exitStatuses is the same for every command.
const exitStatuses = `Exit status:
  0  success; for run, CMD's own status when it ran to its end under the
     lease (128+N when signal N ended it, also a signal leases passed on)
  1  refused: the lease is held by another (acquire; run without --wait),
     or you are not its holder at that epoch, or it expired (renew, release)
  2  usage or bad input: nothing was done
  3  failure: the store failed or could not be reached, or an outcome is
     unknown (the message says "outcome unknown": the change may have
     taken effect)
  4  run: the lease ended before CMD did (renewals refused, or failing
     until the session's deadline); CMD was stopped
  run's CMD may itself exit 1 to 4: the line leases writes on stderr
  (starting "leases: run:") says when a status is leases' own.
`

const holdersUsage = `Usage: leases holders [RESOURCE...] [--json] STORE

Who holds each named resource, at which epoch, and for how long: with no
RESOURCE, every live lease. A free resource shows "free". Times are the
store's clock, and the last line says whose it is: a SQLite file's leases
are timed by this machine's clock; PostgreSQL's by the server's clock,
which also counts the time left; etcd's by its leader, which says only the
whole seconds left, so an etcd expiry is an upper bound ("at most").
--json prints one object: {"store", "clock", "at_the_latest", "now",
"leases": [{"resource", "holder", "epoch", "expires_at", "expires_in_ms"}],
"free": [RESOURCE...]}. It changes nothing, and never creates a store.
`

const acquireUsage = `Usage: leases acquire RESOURCE --holder NAME --ttl D [--json] STORE

Take the lease on RESOURCE for NAME, for D (such as 30s), and print it on
one line (or as JSON): its epoch, the fencing token to send with every
write, and when it expires. Refused (exit 1) while another lease is live;
the message names the holder and how long it has left. Nothing renews the
lease: renew it before it expires, and release it when done.
`

const renewUsage = `Usage: leases renew RESOURCE --holder NAME --epoch N --ttl D [--json] STORE

Extend NAME's lease on RESOURCE at epoch N to D from now (never earlier
than it expired before). Refused (exit 1) if the lease at N is not NAME's
or has expired: a lease that ran out can only be acquired again, with a
new epoch. etcd keeps the TTL the lease was granted with. On PostgreSQL
the time left is the server's to say: the line gives the expiry alone.
`

const releaseUsage = `Usage: leases release RESOURCE --holder NAME --epoch N [--json] STORE

End NAME's lease on RESOURCE at epoch N now, so that the next holder need
not wait for it to expire. Its epoch is never granted again.

To free someone else's stuck lease safely:
  1. Look first: leases holders RESOURCE, and pass the holder and the
     epoch it prints. The release happens only if that very lease is
     still the live one: if it expired, or was released and granted
     again, it is refused (exit 1) and nothing changes, so you never end
     a newer holder's lease.
  2. Make sure the holder has stopped. Releasing does not stop a process:
     one that is alive but slow goes on believing it holds the lease until
     its next renewal is refused (a leases run then stops its CMD, exit 4).
     Until then only a fenced resource, one that refuses epochs older than
     the newest it has seen, keeps its writes out.
`

const runUsage = `Usage: leases run RESOURCE [--holder NAME] [--ttl D] [--wait] [flags] STORE -- CMD [ARG...]

Take the lease on RESOURCE (or, with --wait, wait for it), run CMD under
it, keep renewing it, and release it when CMD ends, like consul lock or
flock(1). CMD gets LEASES_RESOURCE, LEASES_HOLDER and LEASES_EPOCH in its
environment: send the epoch with every write to a fenced resource.

When the lease ends before CMD does, CMD is stopped and leases exits 4.
At the session's deadline (which comes --margin before the lease could
expire) CMD's watchdog, a process of its own that leases tells each new
deadline, stops CMD whether or not leases itself runs: SIGTERM to CMD's
process group --grace before the deadline, SIGKILL at it. When a
renewal is refused (say after someone's release) leases stops CMD at
once: SIGTERM, then SIGKILL after --grace. On Windows there is no
watchdog, and leases kills CMD. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to leases are passed on
to CMD's process group; leases then exits with CMD's status. When CMD
exits, whatever it left running in its process group is killed (Linux,
macOS) before the lease is released: nothing of CMD's runs without it.
A release that fails is said on stderr (the lease then runs out by
itself); the status stays CMD's.

CMD runs in a process group of its own, which the watchdog leads: it
should not read from a terminal. If leases itself is killed (SIGKILL),
the watchdog kills CMD's group (and Linux kills CMD at once too); on
Windows CMD goes on without the lease, which expires.
`
