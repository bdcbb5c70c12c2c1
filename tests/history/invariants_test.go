package history

import (
	"strings"
	"testing"
	"time"

	"leases"
)

// write adds worker's write of value with epoch to the fenced receiver
// of "r", answered outcome with the record stored.
func (s *scripted) write(worker string, epoch int64, value string, outcome leases.Outcome, stored leases.Record) {
	s.op(worker, "write", Record{Resource: "r", Epoch: epoch, Value: value}, ResultOK, Record{Outcome: outcome, Stored: &stored})
}

// fence adds worker's fence (observe) of epoch on the fenced receiver.
func (s *scripted) fence(worker string, epoch int64, outcome leases.Outcome, stored leases.Record) {
	s.op(worker, "fence", Record{Resource: "r", Epoch: epoch}, ResultOK, Record{Outcome: outcome, Stored: &stored})
}

// done adds the end of worker's session of epoch 1 of "r": Done seen
// closed at the tick now, its Deadline deadline, at the moment at.
func (s *scripted) done(worker string, deadline, now, at int64) {
	s.h.Dones = append(s.h.Dones, Done{Worker: worker, Record: Record{Kind: "done", Resource: "r", Epoch: 1, Deadline: deadline, Now: now, At: at}})
}

// Every check of Checks can fail: for each, a history made by hand that
// breaks the property it keeps, in each way it looks for, and the check
// must say what is wrong with it. A check added without a case here fails
// the test.
func TestEveryCheckFindsItsBadHistory(t *testing.T) {
	const second = int64(time.Second)
	cases := []struct {
		check, name string
		want        string // in one of the lines the check finds
		build       func(s *scripted)
	}{
		{"every epoch granted once", "two grants of epoch 1", "granted 2 times", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.acquire("B", 10, 10, ResultOK, 1)
		}},
		{"the authority's tenures agree with every answer", "a grant while the lease is live", "two live leases on r at tick 5", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.acquire("B", 5, 10, ResultOK, 2)
			s.h.Epochs["r"] = 2
		}},
		{"the authority's tenures agree with every answer", "a grant other than asked for", "was granted {", func(s *scripted) {
			s.op("A", "acquire", Record{Resource: "r", Now: 0, TTL: 10}, ResultOK, Record{Lease: lease("A", 1, 0, 20)})
			s.h.Epochs["r"] = 1
		}},
		{"the authority's tenures agree with every answer", "a renewal of an expired lease", "succeeded, but epoch 1 was live only at ticks 0..9", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.op("A", "renew", Record{Resource: "r", Epoch: 1, Now: 10, TTL: 10}, ResultOK, Record{Lease: lease("A", 1, 0, 20)})
			s.h.Epochs["r"] = 1
		}},
		{"the authority's tenures agree with every answer", "a release of an expired lease", "succeeded, but epoch 1 was live only at ticks 0..9", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.op("A", "release", Record{Resource: "r", Epoch: 1, Now: 12}, ResultOK, Record{})
			s.h.Epochs["r"] = 1
		}},
		{"the authority's tenures agree with every answer", "a release after the lease of its holder's latest acquire of unknown outcome ran out",
			"succeeded, but epoch 1 was live only at ticks 12..21", func(s *scripted) {
				s.acquire("A", 0, 10, ResultUnknown, 1)
				s.op("A", "release", Record{Resource: "r", Epoch: 1, Now: 11}, ResultNotHolder, Record{})
				s.acquire("A", 12, 10, ResultUnknown, 1)
				s.op("A", "release", Record{Resource: "r", Epoch: 1, Now: 22}, ResultOK, Record{})
				s.h.Epochs["r"] = 1
			}},
		{"the authority's tenures agree with every answer", "epochs out of grant order", "out of grant order", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 2)
			s.acquire("B", 20, 10, ResultOK, 1)
			s.h.Epochs["r"] = 2
		}},
		{"the authority's tenures agree with every answer", "an epoch skipped, and no acquire of unknown outcome to take it", "epoch 2 of r granted to nobody", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.acquire("B", 20, 10, ResultOK, 3)
			s.h.Epochs["r"] = 3
		}},
		{"the authority's tenures agree with every answer", "the lessor's last epoch below a granted one", "below epoch 2 it granted", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.acquire("B", 20, 10, ResultOK, 2)
			s.h.Epochs["r"] = 1
		}},
		{"the authority's tenures agree with every answer", "a final lease row the answers do not allow", "the answers allow only", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.op("A", "release", Record{Resource: "r", Epoch: 1, Now: 5}, ResultOK, Record{})
			s.h.Epochs["r"] = 1
			s.h.Leases = map[string]LeaseRow{"r": {Epoch: 1, Holder: "A", GrantedAt: 0, ExpiresAt: 10}}
		}},
		{"no call refused as invalid input", "a renewal refused as invalid", "refused as invalid input", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.op("A", "renew", Record{Resource: "r", Epoch: 1, Now: 5}, ResultInvalid, Record{Err: "invalid input: ttl 0"})
			s.h.Epochs["r"] = 1
		}},
		{"every receiver answer agrees with its record, one value per epoch", "two values accepted at one epoch", "accepted two values", func(s *scripted) {
			s.write("A", 1, "a", leases.Accepted, leases.Record{Epoch: 1, ValueEpoch: 1, Value: "a"})
			s.write("A", 1, "b", leases.Accepted, leases.Record{Epoch: 1, ValueEpoch: 1, Value: "b"})
		}},
		{"every receiver answer agrees with its record, one value per epoch", "a stale answer at the record's own epoch", ": stale, with the record", func(s *scripted) {
			s.write("A", 1, "a", leases.Accepted, leases.Record{Epoch: 1, ValueEpoch: 1, Value: "a"})
			s.write("B", 1, "b", leases.Stale, leases.Record{Epoch: 1, ValueEpoch: 1, Value: "a"})
		}},
		{"every receiver answer agrees with its record, one value per epoch", "a conflict that shows the value offered", ": conflict, with the record", func(s *scripted) {
			s.write("A", 1, "a", leases.Conflict, leases.Record{Epoch: 1, ValueEpoch: 1, Value: "a"})
		}},
		{"the receiver's fence never goes down, and nothing is accepted below it", "a write accepted below a fence answered before", "was accepted below epoch 2", func(s *scripted) {
			s.fence("B", 2, leases.Accepted, leases.Record{Epoch: 2})
			s.write("A", 1, "a", leases.Accepted, leases.Record{Epoch: 1, ValueEpoch: 1, Value: "a"})
		}},
		{"the receiver's fence never goes down, and nothing is accepted below it", "a record shown below one shown before", "the fence of r went down", func(s *scripted) {
			s.fence("B", 2, leases.Accepted, leases.Record{Epoch: 2})
			s.write("A", 1, "a", leases.Stale, leases.Record{Epoch: 1, ValueEpoch: 1, Value: "b"})
		}},
		{"the receiver's final record is what the answers allow", "a value no accepted write gave", "final record for r is {Epoch:1 ValueEpoch:1 Value:z}", func(s *scripted) {
			s.write("A", 1, "a", leases.Accepted, leases.Record{Epoch: 1, ValueEpoch: 1, Value: "a"})
			s.h.Records = map[string]leases.Record{"r": {Epoch: 1, ValueEpoch: 1, Value: "z"}}
		}},
		{"the receiver's final record is what the answers allow", "a fence below one an answer showed", "the answers say epoch 2", func(s *scripted) {
			s.fence("A", 2, leases.Accepted, leases.Record{Epoch: 2})
			s.h.Records = map[string]leases.Record{"r": {Epoch: 1}}
		}},
		{"the file is sound (integrity_check)", "integrity_check finds a page never used", "Page 5 is never used", func(s *scripted) {
			s.h.Integrity = "*** in database main ***\nPage 5 is never used"
		}},
		{"every row's epoch granted to its writer", "a row by a writer the epoch was not granted to", "written by B, but that epoch was granted to [A]", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.tenure("A", 1, 0)
			s.tx("B", 1, 1)
			s.h.Epochs["r"] = 1
		}},
		{"business epochs never decrease in commit order", "a row of a lower epoch after a higher one", "committed after row #1 at epoch 2", func(s *scripted) {
			s.tx("B", 2, 1)
			s.tx("A", 1, 2)
		}},
		{"business epochs never decrease in commit order", "a counter that is not the number of rows", "the counter is at 2, with 1 rows", func(s *scripted) {
			s.tx("A", 1, 1)
			s.h.Counters["r"] = 2
		}},
		{"business epochs never decrease in commit order", "a gap in the rows' sequence", "row 1 has sequence number 2", func(s *scripted) {
			s.tx("A", 1, 2)
		}},
		{"the fence is the newest committed tenure and covers every row", "the fence below a tenure that began", "below the tenure of epoch 1 that began", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.tenure("A", 1, 0)
		}},
		{"the fence is the newest committed tenure and covers every row", "the fence at an epoch no tenure began", "which no tenure may have begun", func(s *scripted) {
			s.h.Fences["r"] = 3
		}},
		{"the fence is the newest committed tenure and covers every row", "a row above the fence", "row #1 at epoch 2 above the fence at 1", func(s *scripted) {
			s.tx("A", 2, 1)
			s.h.Fences["r"] = 1
		}},
		{"no row commits after a newer tenure began", "a stale row", "STALE ROW", func(s *scripted) {
			s.tenure("B", 2, 0)
			s.tx("A", 1, 1)
		}},
		{"transactions say what they did", "a commit whose row is not there", "said it committed #1", func(s *scripted) {
			s.op("A", "tx", Record{Resource: "r", Epoch: 1, OpID: "A/1"}, ResultOK, Record{Seq: 1})
		}},
		{"transactions say what they did", "a failure whose row committed", "yet its row #1 committed", func(s *scripted) {
			s.tx("A", 1, 1)
			s.h.Ops[len(s.h.Ops)-1].Ret.Result = ResultFailed
		}},
		{"every unknown outcome resolved, and resolved right", "a worker that went on without resolving", "went on without resolving it", func(s *scripted) {
			s.op("A", "tx", Record{Resource: "r", Epoch: 1, OpID: "A/1"}, ResultUnknown, Record{})
			s.op("A", "check", Record{Resource: "r", Epoch: 1}, ResultOK, Record{})
		}},
		{"every unknown outcome resolved, and resolved right", "a resolution that says not committed of a row that is there", "WRONG RESOLUTION", func(s *scripted) {
			s.tx("A", 1, 1)
			s.h.Ops[len(s.h.Ops)-1].Ret.Result = ResultUnknown
			s.op("A", "resolve", Record{Resource: "r", OpID: "A/1"}, ResultOK, Record{Committed: false})
		}},
		{"every unknown outcome resolved, and resolved right", "a resolution that fails", "answered neither committed", func(s *scripted) {
			s.op("A", "tx", Record{Resource: "r", Epoch: 1, OpID: "A/1"}, ResultUnknown, Record{})
			s.op("A", "resolve", Record{Resource: "r", OpID: "A/1"}, ResultFailed, Record{Err: "broken"})
		}},
		{"no Check live at or after the lease's expiry", "a Check live at the expiry tick", "was nil at tick 10", func(s *scripted) {
			s.acquire("A", 0, 10, ResultOK, 1)
			s.op("A", "check", Record{Resource: "r", Epoch: 1, Now: 10}, ResultOK, Record{})
		}},
		{"Done at Deadline in an unstopped process", "Done 100 ms late", "closed 100ms after its Deadline", func(s *scripted) {
			s.done("A", 1000, 1100, 2*second)
		}},
		{"no renewal commits after its session ended, in an unstopped process", "a renewal that began to commit a second after the end", "began to commit 1s after the session ended", func(s *scripted) {
			s.done("A", 1000, 1000, second)
			s.h.Ops = append(s.h.Ops, &Op{Worker: "A", Call: Record{Kind: "call", Op: "renew", Resource: "r", Epoch: 1, T: second / 2},
				Ret: &Record{Kind: "ret", Result: ResultOK, Lease: lease("A", 1, 0, 3000), T: 3 * second}})
			s.h.LessorCommits = map[string][]int64{"A": {2 * second}}
		}},
		{"Wait fails only with the caller's context", "a Wait that failed of itself", "Wait for r failed: broken", func(s *scripted) {
			s.op("A", "wait", Record{Resource: "r"}, ResultFailed, Record{Err: "broken"})
		}},
		{"Wait fails only with the caller's context", "a Wait cut off while the caller's context was live", "Wait for r failed: context canceled", func(s *scripted) {
			s.op("A", "wait", Record{Resource: "r"}, ResultCanceled, Record{Err: "context canceled"})
		}},
		{"Wait returns a live session", "a session whose grant came back after its deadline", "10 ms after the session's deadline", func(s *scripted) {
			s.op("A", "acquire", Record{Resource: "r", Now: 0, TTL: 10}, ResultOK, Record{Lease: lease("A", 1, 0, 10), Tick: 50})
			s.op("A", "wait", Record{Resource: "r"}, ResultOK, Record{Lease: lease("A", 1, 0, 10), Deadline: 40})
		}},
		{"every grant reported to its caller or released by it", "a grant Wait said nothing of", "never released, and never reported", func(s *scripted) {
			s.h.LessorRows = []RowWrite{{Resource: "r", Holder: "A", Epoch: 1, Held: true, Revision: 2}}
			s.op("A", "wait", Record{Resource: "r"}, ResultCanceled, Record{CtxDone: true})
			s.op("A", "acquire", Record{Resource: "r"}, ResultUnknown, Record{Lease: lease("A", 1, 0, 10)})
		}},
		{"no row of epoch e commits after the grant of epoch e+1 returned", "a guarded COMMIT after the next grant", "LATE ROW", func(s *scripted) {
			s.server("A", "acquire", 0, 10, ResultOK, lease("A", 1, 0, 10))
			s.tenure("A", 1, 0)
			s.server("B", "acquire", 0, 10, ResultOK, lease("B", 2, 20, 30))
			s.guardedTx("A", 1, 1, 5)
		}},
		{"no guarded row of a transaction begun at or after its lease's expiry", "a transaction admitted at the expiry tick", "EXPIRED ROW", func(s *scripted) {
			s.server("A", "acquire", 0, 10, ResultOK, lease("A", 1, 100, 110))
			s.guardedTx("A", 1, 1, 110)
		}},
		{"no row committed after its lease's expiry on the server's clock (commit timestamps)", "a commit timestamp a millisecond past the expiry", "LATE COMMIT", func(s *scripted) {
			s.server("A", "acquire", 0, 10, ResultOK, lease("A", 1, 100, 110))
			s.guardedTx("A", 1, 1, 105)
			s.h.Rows[0].CommittedAt = 111 * int64(time.Millisecond)
		}},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.check] = true
		t.Run(c.check+"/"+c.name, func(t *testing.T) {
			s := newScripted()
			c.build(s)
			for _, check := range Checks(time.Millisecond) {
				if check.Name == c.check {
					found := strings.Join(check.Run(s.h), "\n")
					if !strings.Contains(found, c.want) {
						t.Errorf("found %q; want a line with %q", found, c.want)
					}
					return
				}
			}
			t.Fatalf("no check is named %q", c.check)
		})
	}
	for _, check := range Checks(time.Millisecond) {
		if !covered[check.Name] {
			t.Errorf("%q has no bad history in this test", check.Name)
		}
	}
}
