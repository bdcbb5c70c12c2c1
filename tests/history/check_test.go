package history

import (
	"strings"
	"testing"

	"leases"
)

// The check of issue 20 on histories made by hand: a grant the lessor's
// history holds is fine if it was released, or if Wait told its caller
// (a session, or an error saying the lease may still be held), or if
// the holder was killed in that Wait; a grant that Wait reported as a
// plain context error, or as released when it was not, is a violation.
func TestGrantsReportedOrReleased(t *testing.T) {
	granted := RowWrite{Resource: "r", Holder: "w1", Epoch: 1, Held: true, Revision: 2}
	released := RowWrite{Resource: "r", Epoch: 1, Revision: 3}
	lease := &leases.Lease{Resource: "r", Holder: "w1", Epoch: 1, ExpiresAt: 100}
	for _, c := range []struct {
		name    string
		rows    []RowWrite
		acquire *Record // the acquire's return inside the Wait; nil: killed during it
		release *Record // the return of the holder's release of epoch 1, if any
		wait    *Record // the Wait's return; nil: killed during it
		bad     bool
	}{
		{"released", []RowWrite{granted, released}, &Record{Result: ResultUnknown, Lease: lease},
			&Record{Result: ResultOK}, &Record{Result: ResultCanceled, CtxDone: true}, false},
		{"a session", []RowWrite{granted}, &Record{Result: ResultOK, Lease: lease},
			nil, &Record{Result: ResultOK, Lease: lease}, false},
		{"said to be possibly held", []RowWrite{granted}, &Record{Result: ResultUnknown, Lease: lease},
			&Record{Result: ResultFailed}, &Record{Result: ResultUnknown, Lease: lease, CtxDone: true}, false},
		{"found expired by its release", []RowWrite{granted}, &Record{Result: ResultUnknown, Lease: lease},
			&Record{Result: ResultExpired}, &Record{Result: ResultOK, Lease: &leases.Lease{Resource: "r", Holder: "w1", Epoch: 2}}, false},
		{"found superseded by its release", []RowWrite{granted, {Resource: "r", Holder: "w2", Epoch: 2, Held: true, Revision: 4}},
			&Record{Result: ResultUnknown, Lease: lease}, &Record{Result: ResultNotHolder}, &Record{Result: ResultCanceled, CtxDone: true}, false},
		{"found superseded at a later tick by its release (Wait's release of a late grant)",
			[]RowWrite{granted, {Resource: "r", Holder: "w2", Epoch: 2, Held: true, Revision: 4}},
			&Record{Result: ResultOK, Lease: lease}, &Record{Result: ResultBackwards},
			&Record{Result: ResultOK, Lease: &leases.Lease{Resource: "r", Holder: "w1", Epoch: 3}}, false},
		{"refused at a later tick, and no later grant", []RowWrite{granted}, &Record{Result: ResultOK, Lease: lease},
			&Record{Result: ResultBackwards}, &Record{Result: ResultCanceled, CtxDone: true}, true},
		{"killed in the Wait", []RowWrite{granted}, nil, nil, nil, false},
		{"killed after the acquire returned", []RowWrite{granted}, &Record{Result: ResultUnknown, Lease: lease}, nil, nil, false},
		{"said to be nothing (issue 20)", []RowWrite{granted}, &Record{Result: ResultUnknown, Lease: lease},
			nil, &Record{Result: ResultCanceled, CtxDone: true}, true},
		{"not released, and a later grant to itself", []RowWrite{granted}, &Record{Result: ResultUnknown, Lease: lease},
			nil, &Record{Result: ResultOK, Lease: &leases.Lease{Resource: "r", Holder: "w1", Epoch: 2}}, true},
		{"refused before the grant took effect", []RowWrite{granted}, &Record{Result: ResultUnknown, Lease: lease},
			&Record{Result: ResultNotHolder}, &Record{Result: ResultUnknown, Lease: lease, Released: true, CtxDone: true}, true},
		{"never granted", nil, &Record{Result: ResultUnknown, Lease: lease},
			&Record{Result: ResultNotHolder}, &Record{Result: ResultUnknown, Lease: lease, Released: true, CtxDone: true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &History{LessorRows: c.rows}
			wait := &Op{Worker: "w1", Call: Record{Kind: "call", Op: "wait", Resource: "r", T: 10}}
			acquire := &Op{Worker: "w1", Call: Record{Kind: "call", Op: "acquire", Resource: "r", T: 20}}
			if c.acquire != nil {
				r := *c.acquire
				r.T = 30
				acquire.Ret = &r
			}
			if c.wait != nil {
				r := *c.wait
				r.T = 40
				wait.Ret = &r
			}
			h.Ops = []*Op{wait, acquire}
			if c.release != nil {
				r := *c.release
				r.T = 36
				h.Ops = append(h.Ops, &Op{Worker: "w1", Ret: &r,
					Call: Record{Kind: "call", Op: "release", Resource: "r", Holder: "w1", Epoch: 1, T: 34}})
			}
			var got []string // about w1's epoch 1 (another holder's grant has no records here)
			for _, v := range grantsReportedOrReleased(h) {
				if strings.Contains(v, "epoch 1 of r") {
					got = append(got, v)
				}
			}
			if (len(got) > 0) != c.bad {
				t.Fatalf("violations: %v; want some: %v", got, c.bad)
			}
		})
	}
}
