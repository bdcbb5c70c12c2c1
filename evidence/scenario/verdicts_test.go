package scenario

import (
	"reflect"
	"slices"
	"testing"

	"leases"
)

// Hand-built steps for the verdict table. A's lease is granted at tick 0
// with a ttl of 3 so that its grant tick, the tick before its expiry and
// its expiry tick are three different ticks.
func acquireGranted(actor string, tick, epoch, expiresAt int64) Step {
	return Step{Actor: actor, Operation: OpAcquire, Tick: tick, Epoch: epoch, ExpiresAt: expiresAt,
		Outcome: OutcomeGranted, HighestEpochGranted: epoch}
}

func acquireRefused(actor string, tick, highest int64) Step {
	return Step{Actor: actor, Operation: OpAcquire, Tick: tick, Outcome: OutcomeRefused, HighestEpochGranted: highest}
}

func writeStep(actor string, epoch int64, value string, outcome leases.Outcome, highest int64) Step {
	return Step{Actor: actor, Operation: OpWrite, Epoch: epoch, Value: value, Outcome: string(outcome), HighestEpochGranted: highest}
}

func observeStep(actor string, epoch int64, outcome leases.Outcome, highest int64) Step {
	return Step{Actor: actor, Operation: OpFence, Epoch: epoch, Outcome: string(outcome), HighestEpochGranted: highest}
}

func storedValue(value string, epoch int64) *leases.Record {
	return &leases.Record{Epoch: epoch, Value: value, ValueEpoch: epoch}
}

type verdictCase struct {
	name  string
	steps []Step
	final *leases.Record
	want  Verdicts
}

// toolVerdictCase is a case of the tool's verdicts: no receiver's
// record, and the tool's effects at the end.
type toolVerdictCase struct {
	verdictCase
	effects []ToolEffect
}

func toolCase(name string, steps []Step, want Verdicts, effects []ToolEffect) toolVerdictCase {
	return toolVerdictCase{verdictCase{name: name, steps: steps, want: want}, effects}
}

// verdictCases are step lists where each verdict must come out true, and
// near misses where it must not. want is the whole Verdicts, so a case
// also shows that no other verdict is set by it.
var verdictCases = []verdictCase{
	{"nothing happened", nil, nil, Verdicts{}},

	// acquire_refused_one_tick_before_expiry
	{"another holder refused one tick before the expiry",
		[]Step{acquireGranted("A", 0, 1, 3), acquireRefused("B", 2, 1)}, nil,
		Verdicts{RefusedOneTickBeforeExpiry: true}},
	{"another holder refused at the grant tick",
		[]Step{acquireGranted("A", 0, 1, 3), acquireRefused("B", 0, 1)}, nil, Verdicts{}},
	{"another holder refused at the expiry tick",
		[]Step{acquireGranted("A", 0, 1, 3), acquireRefused("B", 3, 1)}, nil, Verdicts{}},
	{"the same holder refused one tick before its own expiry",
		[]Step{acquireGranted("A", 0, 1, 3), acquireRefused("A", 2, 1)}, nil, Verdicts{}},
	{"a refusal with no lease granted before",
		[]Step{acquireRefused("B", 2, 0)}, nil, Verdicts{}},
	{"another holder granted, not refused, one tick before the expiry",
		[]Step{acquireGranted("A", 0, 1, 3), acquireGranted("B", 2, 2, 5)}, nil, Verdicts{}},
	{"a refusal one tick before the expiry of a lease its holder has since acquired again",
		[]Step{acquireGranted("A", 0, 1, 3), acquireGranted("A", 1, 2, 4), acquireRefused("B", 2, 2)}, nil, Verdicts{}},
	{"a refusal one tick before the expiry of the lease acquired again",
		[]Step{acquireGranted("A", 0, 1, 3), acquireGranted("A", 1, 2, 4), acquireRefused("B", 3, 2)}, nil,
		Verdicts{RefusedOneTickBeforeExpiry: true}},

	// acquire_granted_at_expiry_tick
	{"another holder granted at the expiry tick with a higher epoch",
		[]Step{acquireGranted("A", 0, 1, 3), acquireGranted("B", 3, 2, 6)}, nil,
		Verdicts{GrantedAtExpiry: true}},
	{"another holder granted one tick after the expiry",
		[]Step{acquireGranted("A", 0, 1, 3), acquireGranted("B", 4, 2, 7)}, nil, Verdicts{}},
	{"another holder granted at the expiry tick with the same epoch",
		[]Step{acquireGranted("A", 0, 1, 3), acquireGranted("B", 3, 1, 6)}, nil, Verdicts{}},
	{"another holder granted at the expiry tick with a lower epoch",
		[]Step{acquireGranted("A", 0, 2, 3), acquireGranted("B", 3, 1, 6)}, nil, Verdicts{}},
	{"the same holder granted again at its expiry tick",
		[]Step{acquireGranted("A", 0, 1, 3), acquireGranted("A", 3, 2, 6)}, nil, Verdicts{}},
	{"another holder refused at the expiry tick, then granted after it",
		[]Step{acquireGranted("A", 0, 1, 3), acquireRefused("B", 3, 1), acquireGranted("B", 4, 2, 7)}, nil, Verdicts{}},
	{"the first grant of all, at a tick that is no one's expiry",
		[]Step{acquireGranted("B", 3, 1, 6)}, nil, Verdicts{}},

	// stale_write_accepted
	{"a write accepted below the highest epoch granted",
		[]Step{acquireGranted("A", 0, 1, 3), acquireGranted("B", 3, 2, 6), writeStep("A", 1, "a", leases.Accepted, 2)}, storedValue("a", 1),
		Verdicts{GrantedAtExpiry: true, StaleWriteAccepted: true}},
	{"a write accepted at the highest epoch granted",
		[]Step{acquireGranted("A", 0, 1, 3), acquireGranted("B", 3, 2, 6), writeStep("B", 2, "b", leases.Accepted, 2)}, storedValue("b", 2),
		Verdicts{GrantedAtExpiry: true}},
	{"an observe accepted below the highest epoch granted is no write",
		[]Step{observeStep("A", 1, leases.Accepted, 2)}, nil, Verdicts{}},

	// stale_write_rejected
	{"a write rejected as stale",
		[]Step{writeStep("A", 1, "a", leases.Stale, 2)}, nil, Verdicts{StaleWriteRejected: true}},
	{"an observe rejected as stale is no write",
		[]Step{observeStep("A", 1, leases.Stale, 2)}, nil, Verdicts{}},

	// newer_value_lost
	{"the final value's epoch below a value accepted earlier",
		[]Step{writeStep("B", 2, "b", leases.Accepted, 2), writeStep("A", 1, "a", leases.Accepted, 2)}, storedValue("a", 1),
		Verdicts{StaleWriteAccepted: true, NewerValueLost: true}},
	{"the final value at the highest epoch accepted",
		[]Step{writeStep("A", 1, "a", leases.Accepted, 2), writeStep("B", 2, "b", leases.Accepted, 2)}, storedValue("b", 2),
		Verdicts{StaleWriteAccepted: true}},
	{"the higher epoch's write rejected, not accepted",
		[]Step{writeStep("B", 2, "b", leases.Conflict, 2), writeStep("A", 1, "a", leases.Accepted, 1)}, storedValue("a", 1),
		Verdicts{ConflictRejected: true}},
	{"the higher epoch only observed, never a value",
		[]Step{observeStep("B", 2, leases.Accepted, 2), writeStep("A", 1, "a", leases.Accepted, 1)},
		&leases.Record{Epoch: 2, Value: "a", ValueEpoch: 1}, Verdicts{}},
	{"nothing stored at the end",
		[]Step{writeStep("B", 2, "b", leases.Accepted, 2)}, nil, Verdicts{}},

	// two_values_accepted_at_one_epoch
	{"two values accepted at one epoch",
		[]Step{writeStep("A", 1, "a", leases.Accepted, 1), writeStep("B", 1, "b", leases.Accepted, 1)}, storedValue("b", 1),
		Verdicts{TwoValuesAcceptedAtOneEpoch: true}},
	{"one value accepted twice at one epoch",
		[]Step{writeStep("A", 1, "a", leases.Accepted, 1), writeStep("A", 1, "a", leases.Accepted, 1)}, storedValue("a", 1),
		Verdicts{}},
	{"two values accepted at two epochs",
		[]Step{writeStep("A", 1, "a", leases.Accepted, 2), writeStep("B", 2, "b", leases.Accepted, 2)}, storedValue("b", 2),
		Verdicts{StaleWriteAccepted: true}},
	{"a second value at one epoch rejected as a conflict",
		[]Step{writeStep("A", 1, "a", leases.Accepted, 1), writeStep("B", 1, "b", leases.Conflict, 1)}, storedValue("a", 1),
		Verdicts{ConflictRejected: true}},

	// replay_reported, conflict_rejected
	{"a write reported as a replay",
		[]Step{writeStep("B", 2, "b", leases.Accepted, 2), writeStep("B", 2, "b", leases.Replay, 2)}, storedValue("b", 2),
		Verdicts{ReplayReported: true}},
	{"an observe reported as a replay is no write",
		[]Step{observeStep("B", 2, leases.Accepted, 2), observeStep("B", 2, leases.Replay, 2)}, nil, Verdicts{}},
	{"a write rejected as a conflict",
		[]Step{writeStep("B", 2, "b", leases.Accepted, 2), writeStep("B", 2, "c", leases.Conflict, 2)}, storedValue("b", 2),
		Verdicts{ConflictRejected: true}},

	// not_live_rejected
	{"a guarded write rejected as not live",
		[]Step{writeStep("A", 1, "a", leases.NotLive, 2)}, nil, Verdicts{NotLiveRejected: true}},
	{"an observe answered not live is no write",
		[]Step{observeStep("A", 1, leases.NotLive, 2)}, nil, Verdicts{}},

	// write_not_sent_session_ended
	{"a write not sent because the session ended",
		[]Step{writeStep("A", 1, "a", OutcomeNotSent, 2)}, nil, Verdicts{WriteNotSentSessionEnded: true}},
	{"a session's resume that found it ended is no write",
		[]Step{{Actor: "A", Operation: OpResume, Outcome: OutcomeEnded}}, nil, Verdicts{}},

	// members_agree
	{"every member holds the same epoch and record",
		[]Step{memberRead(2, storedValue("b", 2)), memberRead(2, storedValue("b", 2)), memberRead(2, storedValue("b", 2))},
		nil, Verdicts{MembersAgree: true}},
	{"one member holds another record",
		[]Step{memberRead(2, storedValue("b", 2)), memberRead(2, storedValue("a", 1))}, nil, Verdicts{}},
	{"one member holds another epoch",
		[]Step{memberRead(2, storedValue("b", 2)), memberRead(1, storedValue("b", 2))}, nil, Verdicts{}},
	{"one member holds no record",
		[]Step{memberRead(2, storedValue("b", 2)), memberRead(2, nil)}, nil, Verdicts{}},

	// a session's start counts as an acquire
	{"a session granted, then another holder at its expiry tick",
		[]Step{{Actor: "A", Operation: OpSession, Tick: 0, Epoch: 1, ExpiresAt: 3, Outcome: OutcomeGranted, HighestEpochGranted: 1},
			acquireRefused("B", 2, 1), acquireGranted("B", 3, 2, 6)}, nil,
		Verdicts{RefusedOneTickBeforeExpiry: true, GrantedAtExpiry: true}},
}

var (
	oneEffect = []ToolEffect{{Epoch: 1, Key: "op-1", Value: "a"}}
	twice     = []ToolEffect{{Epoch: 1, Key: "op-1", Value: "a"}, {Epoch: 1, Key: "op-1", Value: "a"}}
)

// toolStep is a tool call with its answer (newest: the epoch a stale
// answer names) and the tool's effects after it.
func toolStep[O ~string](actor string, epoch int64, key string, outcome O, highest, newest int64, after []ToolEffect) Step {
	return Step{Actor: actor, Operation: OpCallTool, Epoch: epoch, Key: key, Outcome: string(outcome),
		HighestEpochGranted: highest, NewestEpoch: newest, ToolEffectsAfter: after}
}

// toolVerdictCases are the verdicts of the tool's scenarios, as
// verdictCases are the others'.
var toolVerdictCases = []toolVerdictCase{
	// tool_call_refused_stale_with_newest_epoch
	toolCase("a stale call refused, the newest epoch named, no effect",
		[]Step{toolStep("A", 1, "op-1", leases.Accepted, 1, 0, oneEffect), toolStep("A", 1, "op-2", leases.Stale, 2, 2, oneEffect)},
		Verdicts{ToolStaleRefused: true}, nil),
	toolCase("a stale call refused naming an older epoch than granted",
		[]Step{toolStep("A", 1, "op-2", leases.Stale, 3, 2, nil)}, Verdicts{}, nil),
	toolCase("a stale call refused, and an effect added all the same",
		[]Step{toolStep("A", 1, "op-2", leases.Stale, 2, 2, oneEffect)}, Verdicts{}, nil),

	// tool_retry_replayed_one_effect
	toolCase("a retry after a lost answer replayed, one effect",
		[]Step{toolStep("A", 1, "op-1", OutcomeLost, 1, 0, oneEffect), toolStep("A", 1, "op-1", leases.Replay, 1, 0, oneEffect)},
		Verdicts{ToolReplayOneEffect: true}, oneEffect),
	toolCase("a replay with no answer lost before",
		[]Step{toolStep("A", 1, "op-1", leases.Accepted, 1, 0, oneEffect), toolStep("A", 1, "op-1", leases.Replay, 1, 0, oneEffect)},
		Verdicts{}, oneEffect),
	toolCase("a retry after a lost answer done again",
		[]Step{toolStep("A", 1, "op-1", OutcomeLost, 1, 0, oneEffect), toolStep("A", 1, "op-1", leases.Accepted, 1, 0, twice)},
		Verdicts{ToolEffectTwice: true}, twice),
	toolCase("a replay after a lost answer, with two effects",
		[]Step{toolStep("A", 1, "op-1", OutcomeLost, 1, 0, twice), toolStep("A", 1, "op-1", leases.Replay, 1, 0, twice)},
		Verdicts{ToolEffectTwice: true}, twice),

	// tool_conflict_rejected
	toolCase("another request under a used key rejected, no effect",
		[]Step{toolStep("B", 1, "op-1", leases.Accepted, 1, 0, oneEffect), toolStep("B", 1, "op-1", leases.Conflict, 1, 0, oneEffect)},
		Verdicts{ToolConflictRejected: true}, oneEffect),
	toolCase("a conflict answered, and an effect added",
		[]Step{toolStep("B", 1, "op-1", leases.Accepted, 1, 0, oneEffect), toolStep("B", 1, "op-1", leases.Conflict, 1, 0, twice)},
		Verdicts{}, nil),

	// tool_stale_call_accepted
	toolCase("a call below the highest epoch granted done",
		[]Step{toolStep("A", 1, "op-2", leases.Accepted, 2, 0, oneEffect)},
		Verdicts{ToolStaleAccepted: true}, nil),
	toolCase("a call at the highest epoch granted done",
		[]Step{toolStep("A", 2, "op-2", leases.Accepted, 2, 0, oneEffect)}, Verdicts{}, nil),

	// tool_effect_done_twice
	toolCase("one operation with two effects at the end", nil, Verdicts{ToolEffectTwice: true}, twice),
	toolCase("one key at two epochs: two operations", nil, Verdicts{},
		[]ToolEffect{{Epoch: 1, Key: "op-1", Value: "a"}, {Epoch: 2, Key: "op-1", Value: "a"}}),
}

func memberRead(epoch int64, record *leases.Record) Step {
	return Step{Actor: ClusterActor, Operation: OpReadMember, Epoch: epoch, Outcome: OutcomeRead, ReceiverAfter: record}
}

// Each verdict is computed from the steps, true where they show it and
// false in the near misses: another tick, the same holder, the same epoch,
// an observe instead of a write, a rejection instead of an acceptance.
func TestComputeVerdicts(t *testing.T) {
	cases := slices.Clone(toolVerdictCases)
	for _, tc := range verdictCases {
		cases = append(cases, toolVerdictCase{verdictCase: tc})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := computeVerdicts(tc.steps, tc.final, tc.effects); got != tc.want {
				t.Fatalf("verdicts\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// The table covers every verdict: each is wanted true by some case, so a
// verdict added to Verdicts without a case here fails.
func TestComputeVerdictsCoversEveryVerdict(t *testing.T) {
	verdicts := reflect.TypeFor[Verdicts]()
	wanted := func(tc verdictCase, i int) bool { return reflect.ValueOf(tc.want).Field(i).Bool() }
	for i := range verdicts.NumField() {
		if !slices.ContainsFunc(verdictCases, func(tc verdictCase) bool { return wanted(tc, i) }) &&
			!slices.ContainsFunc(toolVerdictCases, func(tc toolVerdictCase) bool { return wanted(tc.verdictCase, i) }) {
			t.Errorf("no case wants verdict %s true", verdicts.Field(i).Name)
		}
	}
}
