package history

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"leases"
)

// history builds a History from operations written one per line:
// "worker op resource epoch now ttl -> result [epoch expires] [seq N]"
// in the order of their calls, each returning before the next begins,
// unless its result is "killed" or "unknown" (open to the end).
type scripted struct {
	h *History
	t int64
}

func newScripted() *scripted {
	return &scripted{h: &History{Fences: map[string]int64{}, Counters: map[string]int64{}, Epochs: map[string]int64{}}}
}

// op adds an operation of worker that returns result; lease, when not
// nil, is what it returned.
func (s *scripted) op(worker, op string, call Record, result string, ret Record) *Op {
	s.t += 10
	call.Kind, call.Op, call.T = "call", op, s.t
	if call.Holder == "" {
		call.Holder = worker
	}
	o := &Op{Worker: worker, Call: call}
	if result != ResultKilled {
		s.t += 10
		ret.Kind, ret.Result, ret.T = "ret", result, s.t
		o.Ret = &ret
	}
	if op == "tx" {
		commit := Record{Kind: "commit", T: call.T + 1}
		o.Commit = &commit
	}
	s.h.Ops = append(s.h.Ops, o)
	return o
}

func (s *scripted) acquire(worker string, now, ttl int64, result string, epoch int64) {
	ret := Record{}
	if epoch > 0 {
		ret.Lease = &leases.Lease{Resource: "r", Holder: worker, Epoch: epoch, GrantedAt: now, ExpiresAt: now + ttl}
	}
	s.op(worker, "acquire", Record{Resource: "r", Now: now, TTL: ttl}, result, ret)
}

func (s *scripted) tenure(worker string, epoch int64, seen int64) {
	s.op(worker, "tenure", Record{Resource: "r", Epoch: epoch}, ResultOK, Record{})
	s.op(worker, "count", Record{Resource: "r", Epoch: epoch}, ResultOK, Record{Seq: seen})
}

func (s *scripted) tx(worker string, epoch, seq int64) {
	id := worker + "/" + string(rune('0'+seq))
	s.op(worker, "tx", Record{Resource: "r", Epoch: epoch, OpID: id}, ResultOK, Record{Seq: seq})
	s.h.Rows = append(s.h.Rows, Row{Resource: "r", Seq: seq, Epoch: epoch, Writer: worker, OpID: id})
	s.h.Counters["r"] = seq
	s.h.Fences["r"] = max(s.h.Fences["r"], epoch)
}

// The model accepts a history the service path should produce, and the
// checker finds each kind of wrong history: this is the checker's own
// test that can fail.
func TestModelAndChecksTellRightFromWrong(t *testing.T) {
	for _, c := range []struct {
		name       string
		build      func(s *scripted)
		legal      bool
		violations []string // the checks that must find something
	}{
		{"two tenures, one after the other", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.tenure("A", 1, 0)
			s.tx("A", 1, 1)
			s.op("A", "release", Record{Resource: "r", Epoch: 1, Now: 5}, ResultOK, Record{})
			s.acquire("B", 6, 10, ResultOK, 2)
			s.tenure("B", 2, 1)
			s.tx("B", 2, 2)
			s.h.Epochs["r"] = 2
		}, true, nil},
		{"an acquire killed in flight took an epoch", func(s *scripted) {
			s.acquire("A", 0, 10, ResultKilled, 0)
			s.acquire("B", 20, 10, ResultOK, 2)
			s.h.Epochs["r"] = 2
		}, true, nil},
		// The chaos test on etcd met this beside busy loops: a Wait given
		// up as its grant's answer came back releases the grant, and is
		// killed while the release is on its way; the release took
		// effect, and the next holder was granted before the grant's
		// expiry.
		{"an acquire of unknown outcome took an epoch, and its release, killed in flight, ended it", func(s *scripted) {
			s.acquire("A", 0, 10, ResultUnknown, 1)
			s.op("A", "release", Record{Resource: "r", Epoch: 1, Now: 2}, ResultKilled, Record{})
			s.acquire("B", 5, 10, ResultOK, 2)
			s.h.Epochs["r"] = 2
		}, true, nil},
		// The chaos test on etcd met this with its leader partitioned: a
		// Wait's acquire timed out (unknown), its release of the lease
		// it would have granted was refused (the acquire had not taken
		// effect), and its next acquire, of unknown outcome too, named
		// the same epoch and took it; its release succeeded, a second
		// after the first acquire's tick. The release is the second
		// acquire's.
		{"two acquires of unknown outcome named one epoch, and the later one's release succeeded", func(s *scripted) {
			s.acquire("A", 0, 10, ResultUnknown, 1)
			s.op("A", "release", Record{Resource: "r", Epoch: 1, Now: 11}, ResultNotHolder, Record{})
			s.acquire("A", 12, 10, ResultUnknown, 1)
			s.op("A", "release", Record{Resource: "r", Epoch: 1, Now: 15}, ResultOK, Record{})
			s.h.Epochs["r"] = 1
		}, true, nil},
		{"a stale row after the newer tenure began", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.tenure("A", 1, 0)
			s.acquire("B", 10, 10, ResultOK, 2)
			s.tenure("B", 2, 0)
			s.tx("A", 1, 1) // A's commit, after B's tenure began
			s.tx("B", 2, 2)
			s.h.Epochs["r"] = 2
		}, false, []string{"no row commits after a newer tenure began"}},
		{"an epoch granted twice", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.acquire("B", 10, 10, ResultOK, 1)
			s.h.Epochs["r"] = 1
		}, false, []string{"every epoch granted once"}},
		{"a grant while the lease is live", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.acquire("B", 5, 10, ResultOK, 2)
			s.h.Epochs["r"] = 2
		}, false, []string{"the authority's tenures agree with every answer"}},
		{"a row of an epoch its writer was not granted", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.tenure("A", 1, 0)
			s.tx("B", 1, 1)
			s.h.Epochs["r"] = 1
		}, true, []string{"every row's epoch granted to its writer"}},
		{"a Check live after the expiry", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.op("A", "check", Record{Resource: "r", Epoch: 1, Now: 10}, ResultOK, Record{})
			s.h.Epochs["r"] = 1
		}, true, []string{"no Check live at or after the lease's expiry"}},
		{"the fence below a tenure that began", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.tenure("A", 1, 0)
			s.h.Epochs["r"] = 1
		}, false, []string{"the fence is the newest committed tenure and covers every row"}},
		// The evidence's fenced receiver, as the stress tests' workers use it.
		{"the fenced receiver: a write, its replay, a conflict, a fence, a stale write, a read", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.write("A", 1, "a", leases.Accepted, leases.Record{Epoch: 1, ValueEpoch: 1, Value: "a"})
			s.write("A", 1, "a", leases.Replay, leases.Record{Epoch: 1, ValueEpoch: 1, Value: "a"})
			s.write("A", 1, "b", leases.Conflict, leases.Record{Epoch: 1, ValueEpoch: 1, Value: "a"})
			s.op("A", "release", Record{Resource: "r", Epoch: 1, Now: 5}, ResultOK, Record{})
			s.acquire("B", 6, 10, ResultOK, 2)
			s.fence("B", 2, leases.Accepted, leases.Record{Epoch: 2, ValueEpoch: 1, Value: "a"})
			s.write("A", 1, "c", leases.Stale, leases.Record{Epoch: 2, ValueEpoch: 1, Value: "a"})
			s.op("B", "read", Record{Resource: "r"}, ResultOK, Record{Found: true, Stored: &leases.Record{Epoch: 2, ValueEpoch: 1, Value: "a"}})
			s.h.Epochs["r"] = 2
			s.h.Records = map[string]leases.Record{"r": {Epoch: 2, ValueEpoch: 1, Value: "a"}}
		}, true, nil},
		{"the fenced receiver: a write accepted below the fence", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.op("A", "release", Record{Resource: "r", Epoch: 1, Now: 5}, ResultOK, Record{})
			s.acquire("B", 6, 10, ResultOK, 2)
			s.fence("B", 2, leases.Accepted, leases.Record{Epoch: 2})
			s.write("A", 1, "a", leases.Accepted, leases.Record{Epoch: 1, ValueEpoch: 1, Value: "a"})
			s.h.Epochs["r"] = 2
			s.h.Records = map[string]leases.Record{"r": {Epoch: 2, ValueEpoch: 1, Value: "a"}}
		}, false, []string{"the receiver's fence never goes down, and nothing is accepted below it"}},
		// On the server's clock: ticks that the answers show, or none.
		{"server's clock: a grant, a renewal, a refusal, a release, the next grant", func(s *scripted) {
			s.server("A", "acquire", 0, 10, ResultOK, lease("A", 1, 100, 110))
			s.server("A", "renew", 1, 10, ResultOK, lease("A", 1, 100, 115))
			s.server("B", "holder", 0, 0, ResultOK, lease("A", 1, 100, 115))
			s.server("B", "acquire", 0, 10, ResultHeld, lease("A", 1, 100, 115))
			s.server("A", "release", 1, 0, ResultOK, nil)
			s.server("A", "renew", 1, 10, ResultNotHolder, nil)
			s.server("B", "acquire", 0, 10, ResultOK, lease("B", 2, 112, 122))
			s.server("B", "renew", 2, 10, ResultExpired, nil)
			s.h.Epochs["r"] = 2
		}, true, nil},
		{"server's clock: a killed acquire, then a grant at a tick no answer showed", func(s *scripted) {
			s.server("A", "acquire", 0, 10, ResultKilled, nil)
			s.server("B", "acquire", 0, 10, ResultHeld, lease("A", 1, 50, 60))
			s.server("B", "acquire", 0, 10, ResultOK, lease("B", 2, 60, 70))
			s.h.Epochs["r"] = 2
		}, true, nil},
		{"server's clock: a grant while the lease is live", func(s *scripted) {
			s.server("A", "acquire", 0, 10, ResultOK, lease("A", 1, 100, 110))
			s.server("B", "acquire", 0, 10, ResultOK, lease("B", 2, 105, 115))
			s.h.Epochs["r"] = 2
		}, false, nil},
		{"server's clock: a renewal whose tick runs backwards", func(s *scripted) {
			s.server("A", "acquire", 0, 10, ResultOK, lease("A", 1, 100, 110))
			s.server("A", "renew", 1, 10, ResultOK, lease("A", 1, 100, 105))
			s.h.Epochs["r"] = 1
		}, false, nil},
		{"server's clock: a refusal by a lease that is not the live one", func(s *scripted) {
			s.server("A", "acquire", 0, 10, ResultOK, lease("A", 1, 100, 110))
			s.server("B", "acquire", 0, 10, ResultHeld, lease("A", 1, 100, 120))
			s.h.Epochs["r"] = 1
		}, false, nil},
		{"server's clock: a renewal by a holder that released", func(s *scripted) {
			s.server("A", "acquire", 0, 10, ResultOK, lease("A", 1, 100, 110))
			s.server("A", "release", 1, 0, ResultOK, nil)
			s.server("A", "renew", 1, 10, ResultOK, lease("A", 1, 100, 115))
			s.h.Epochs["r"] = 1
		}, false, nil},
		{"server's clock: a guarded row committed after the next grant returned", func(s *scripted) {
			s.server("A", "acquire", 0, 10, ResultOK, lease("A", 1, 0, 10))
			s.tenure("A", 1, 0)
			s.server("B", "acquire", 0, 10, ResultOK, lease("B", 2, 20, 30))
			s.guardedTx("A", 1, 1, 5) // its COMMIT sent after B's grant returned
			s.h.Epochs["r"] = 2
		}, false, []string{"no row of epoch e commits after the grant of epoch e+1 returned"}},
		{"server's clock: a held COMMIT not committed when the next grant had returned, that then committed", func(s *scripted) {
			s.server("A", "acquire", 0, 10, ResultOK, lease("A", 1, 0, 10))
			s.tenure("A", 1, 0)
			s.guardedTx("A", 1, 1, 5)
			s.server("B", "acquire", 0, 10, ResultOK, lease("B", 2, 20, 30))
			s.h.Held = append(s.h.Held, HeldCommit{OpID: "A/1", At: s.t + 1})
			s.h.Epochs["r"] = 2
		}, true, []string{"no row of epoch e commits after the grant of epoch e+1 returned"}},
		{"server's clock: a held COMMIT that the next grant waited for", func(s *scripted) {
			s.server("A", "acquire", 0, 10, ResultOK, lease("A", 1, 0, 10))
			s.tenure("A", 1, 0)
			s.guardedTx("A", 1, 1, 5)
			s.h.Held = append(s.h.Held, HeldCommit{OpID: "A/1", At: s.t + 1})
			s.server("B", "acquire", 0, 10, ResultOK, lease("B", 2, 20, 30))
			s.h.Epochs["r"] = 2
		}, true, nil},
		{"server's clock: a guarded row of a transaction begun after the lease's expiry", func(s *scripted) {
			s.server("A", "acquire", 0, 10, ResultOK, lease("A", 1, 100, 110))
			s.tenure("A", 1, 0)
			s.guardedTx("A", 1, 1, 110)
			s.h.Epochs["r"] = 1
		}, true, []string{"no guarded row of a transaction begun at or after its lease's expiry"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newScripted()
			c.build(s)
			result, _, _ := s.h.Linearizable(time.Minute)
			if want := map[bool]porcupine.CheckResult{true: porcupine.Ok, false: porcupine.Illegal}[c.legal]; result != want {
				t.Errorf("porcupine says %s; want %s", result, want)
			}
			if !c.legal && readsAround(s.h.porcupineOps(), time.Minute) {
				t.Errorf("readsAround found a linearization of a history that has none")
			}
			found := map[string][]string{}
			for _, check := range Checks(time.Millisecond) {
				if bad := check.Run(s.h); len(bad) > 0 {
					found[check.Name] = bad
				}
			}
			for _, name := range c.violations {
				if found[name] == nil {
					t.Errorf("%q found nothing", name)
				}
				delete(found, name)
			}
			for name, bad := range found {
				t.Errorf("%q found: %s", name, strings.Join(bad, "; "))
			}
		})
	}
}
