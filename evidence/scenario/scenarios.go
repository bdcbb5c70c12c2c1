package scenario

import (
	"slices"

	"leases/evidence/backend"
)

// Def is one named schedule and the receiver it runs against.
type Def struct {
	Name        string
	Description string
	// Receiver is the receiver the workers write to: a leases.Mode, or
	// Guarded.
	Receiver backend.Receiver
	Params   Parameters
	Schedule func(*script)
	// Backends, when set, are the only backends the scenario runs on.
	Backends []string
	// StopsMembers says that the scenario stops a member of the
	// deployment (the cluster's leader): it runs while nothing else does.
	StopsMembers bool
}

// RunsOn reports whether the scenario runs on the backend called name.
func (d Def) RunsOn(name string) bool {
	return len(d.Backends) == 0 || slices.Contains(d.Backends, name)
}

// Scenario names, as they appear in results.json.
const (
	UnfencedReceiver                   = "unfenced-receiver"
	FencedReceiver                     = "fenced-receiver"
	ExpiryBeforeReceiverObservationGap = "expiry-before-receiver-observation-gap"
	// FenceBeforeActing goes beyond the seed: the remedy for the gap.
	FenceBeforeActing = "fence-before-acting"
	// GuardedReceiverGap goes beyond the seed: the gap's schedule against
	// a receiver that checks the writer's lease in the write's own
	// transaction.
	GuardedReceiverGap = "guarded-receiver"
	// SessionStopsPausedHolder goes beyond the seed: the holder keeps its
	// lease with a session, and after a real pause its session tells it
	// not to write.
	SessionStopsPausedHolder = "session-stops-paused-holder"
	// LeaderFailover goes beyond the seed, on a replicated backend only:
	// the cluster's leader stops between A's grant and B's.
	LeaderFailover = "leader-failover"
	// ToolRefusesPausedAgent goes beyond the seed: an agent calls a tool
	// server (an HTTP tool behind package httpfence, its record of
	// operations in a database of its own) and is paused past its
	// lease's expiry; the next holder calls the tool, and the paused
	// agent's next call is refused as stale.
	ToolRefusesPausedAgent = "tool-refuses-paused-agent"
	// ToolReplaysRetriedCall goes beyond the seed: the tool's answer is
	// lost on the way back, the agent sends the same call again, and the
	// record answers it as a replay, with one effect.
	ToolReplaysRetriedCall = "tool-replays-retried-call"
	// ToolRejectsConflictingKey goes beyond the seed: the agent sends
	// another request under a key already used, and the tool rejects it.
	ToolRejectsConflictingKey = "tool-rejects-conflicting-key"
)

// Every scenario uses the same resource, time-to-live and values, so that
// their steps can be compared line by line.
var (
	gapParams = Parameters{
		Resource: "shared-record",
		TTL:      3,
		ValueA:   "value-from-A",
		ValueB:   "value-from-B",
	}
	pausedHolderParams = Parameters{
		Resource: gapParams.Resource, TTL: gapParams.TTL, ValueA: gapParams.ValueA, ValueB: gapParams.ValueB,
		ConflictingValueB: "other-value-from-B",
	}
	toolParams = Parameters{
		Resource: gapParams.Resource, TTL: gapParams.TTL, ValueA: gapParams.ValueA, ValueB: gapParams.ValueB,
		ConflictingValueB: pausedHolderParams.ConflictingValueB,
	}
	sessionParams = Parameters{
		Resource: gapParams.Resource, TTL: gapParams.TTL, ValueA: gapParams.ValueA, ValueB: gapParams.ValueB,
		SessionMargin: 1,
	}
)

// Defs are the scenarios, in the order results.json lists them.
func Defs() []Def { return defs }

var defs = []Def{
	{
		Name: UnfencedReceiver,
		Description: "A acquires at tick 0 and pauses past its expiry; B is refused one tick before A's expiry, " +
			"acquires at the expiry tick, writes, resends, sends a different value, and exits; A resumes and writes " +
			"with its old epoch. The receiver does not compare epochs.",
		Receiver: backend.Unfenced, Params: pausedHolderParams, Schedule: pausedHolder,
	},
	{
		Name:        FencedReceiver,
		Description: "The same schedule against a receiver that compares epochs.",
		Receiver:    backend.Fenced, Params: pausedHolderParams, Schedule: pausedHolder,
	},
	{
		Name: ExpiryBeforeReceiverObservationGap,
		Description: "A acquires at tick 0 and pauses past its expiry; B acquires at the expiry tick but has not " +
			"written yet; A resumes and writes first, so the fenced receiver has not observed epoch 2; then B " +
			"writes, then A's old write arrives again.",
		Receiver: backend.Fenced, Params: gapParams, Schedule: expiryBeforeObservation,
	},
	{
		Name: FenceBeforeActing,
		Description: "Beyond the seed: the gap's schedule, but B raises the receiver's fence to its epoch (fence) right " +
			"after acquiring and before it reads or writes; A's old write then arrives and is rejected.",
		Receiver: backend.Fenced, Params: gapParams, Schedule: fenceBeforeActing,
	},
	{
		Name: GuardedReceiverGap,
		Description: "Beyond the seed: the gap's schedule against a guarded receiver, which accepts a write only if " +
			"the writer's lease is the authority's live lease at the write's tick, checked in the write's own " +
			"transaction; A's write after B's grant is rejected before B has written.",
		Receiver: backend.Guarded, Params: gapParams, Schedule: expiryBeforeObservation,
	},
	{
		Name: SessionStopsPausedHolder,
		Description: "Beyond the seed: A holds its lease with a session (margin 1 tick) and its process is stopped " +
			"(SIGSTOP) right after the grant; B is refused one tick before A's expiry, acquires at the expiry tick and " +
			"writes; A's process continues (SIGCONT) and finds its clock at tick 3, past its session's deadline " +
			"(tick 2), so it never sends its write.",
		Receiver: backend.Fenced, Params: sessionParams, Schedule: sessionStopsPausedHolder,
	},
	{
		Name: LeaderFailover,
		Description: "Beyond the seed, on a replicated backend: A acquires at tick 0; the cluster's leader member " +
			"stops; B acquires at the expiry tick from the remaining members and writes; A's old write is rejected; " +
			"the stopped member restarts, and each member, read alone, holds the same lease epoch and record.",
		Receiver: backend.Fenced, Params: gapParams, Schedule: leaderFailover, Backends: []string{"etcd"},
		StopsMembers: true,
	},
	{
		Name: ToolRefusesPausedAgent,
		Description: "Beyond the seed, a tool server in a process of its own (HTTP behind httpfence, its record of " +
			"operations and its effects in a SQLite file of its own): A acquires at tick 0 and calls the tool " +
			"(op-1); A's process is stopped (SIGSTOP); B is refused one tick before A's expiry, acquires at the expiry " +
			"tick and calls the tool (op-1, op-2 of its tenure); A continues (SIGCONT), holds no session, and calls the " +
			"tool with epoch 1 (op-2): refused as stale, with epoch 2 named as the newest, and no effect.",
		Receiver: backend.HTTPTool, Params: toolParams, Schedule: toolRefusesPausedAgent,
	},
	{
		Name: ToolReplaysRetriedCall,
		Description: "Beyond the seed: A acquires at tick 0 and calls the tool (op-1); the tool does it and answers, and " +
			"the controller's proxy closes A's connection before the answer reaches A; A sends the same call again: " +
			"a replay of the stored answer, and the operation has one effect.",
		Receiver: backend.HTTPTool, Params: toolParams, Schedule: toolReplaysRetriedCall,
	},
	{
		Name: ToolRejectsConflictingKey,
		Description: "Beyond the seed: B acquires at tick 0 and calls the tool (op-1); B sends another value under the " +
			"same key: a conflict, and no effect; the other value under a key of its own (op-2) is done.",
		Receiver: backend.HTTPTool, Params: toolParams, Schedule: toolRejectsConflictingKey,
	},
}

// pausedHolder is the seed's schedule: A commits its acquisition and
// pauses; B acquires at the exact expiry tick, writes and exits; A resumes
// and writes with its old epoch.
func pausedHolder(r *script) {
	a, b := r.startPair("A", "B")
	expiry := r.def.Params.TTL // A is granted at tick 0
	r.at(0).acquire(a)
	r.at(expiry - 1).acquire(b) // refused: A's lease is live until its expiry tick
	r.at(expiry).acquire(b)     // granted: A's lease has expired, B gets epoch 2
	r.write(b, r.def.Params.ValueB)
	r.write(b, r.def.Params.ValueB)            // a retried write: replay
	r.write(b, r.def.Params.ConflictingValueB) // a second value at epoch 2: conflict
	r.exit(b)
	r.write(a, r.def.Params.ValueA) // the paused holder resumes
	r.exit(a)
}

// expiryBeforeObservation is the gap: the new holder's epoch has not
// reached the receiver when the old holder writes.
func expiryBeforeObservation(r *script) {
	a, b := r.startPair("A", "B")
	expiry := r.def.Params.TTL
	r.at(0).acquire(a)
	r.at(expiry).acquire(b)
	r.write(a, r.def.Params.ValueA) // accepted: the receiver has seen only epoch 1
	r.write(b, r.def.Params.ValueB) // accepted: epoch 2 reaches the receiver
	r.write(a, r.def.Params.ValueA) // stale: now the fence holds
	r.exit(b)
	r.exit(a)
}

// fenceBeforeActing closes the gap: the new holder's epoch reaches the
// receiver before the holder acts, so the old holder's write is already
// stale when it arrives.
func fenceBeforeActing(r *script) {
	a, b := r.startPair("A", "B")
	expiry := r.def.Params.TTL
	r.at(0).acquire(a)
	r.at(expiry).acquire(b)
	r.observe(b)                    // the receiver now fences at epoch 2
	r.write(a, r.def.Params.ValueA) // stale, although B has not written
	r.read(b)                       // B sees what is there before acting
	r.write(b, r.def.Params.ValueB) // accepted: the first value at epoch 2
	r.exit(b)
	r.exit(a)
}

// sessionStopsPausedHolder: the holder's side of the protection. A's
// session would have renewed had A run; paused, A can only learn on
// resuming that its deadline has passed, and then it does not write.
func sessionStopsPausedHolder(r *script) {
	a, b := r.startPair("A", "B")
	expiry := r.def.Params.TTL
	r.at(0).startSession(a, r.def.Params.SessionMargin)
	r.pause(a)
	r.at(expiry - 1).acquire(b) // refused: A's lease is live until its expiry tick
	r.at(expiry).acquire(b)     // granted, epoch 2
	r.write(b, r.def.Params.ValueB)
	r.resume(a)                            // A's clock jumps to the expiry tick: its session has ended
	r.sessionWrite(a, r.def.Params.ValueA) // so A does not send its write
	r.exit(b)
	r.exit(a)
}

// leaderFailover: the authority survives its leader's crash, keeps its
// epochs, and every member agrees once the stopped one is back.
func leaderFailover(r *script) {
	a, b := r.startPair("A", "B")
	expiry := r.def.Params.TTL
	r.at(0).acquire(a)
	r.stopLeader()
	r.at(expiry).acquire(b) // granted by the two members left
	r.write(b, r.def.Params.ValueB)
	r.write(a, r.def.Params.ValueA) // stale
	r.restartMember()
	r.readEachMember()
	r.exit(b)
	r.exit(a)
}

// toolRefusesPausedAgent: the receiver's side of the protection on the
// tool path. A paused agent with no session cannot know that its lease
// has run out; the tool, having admitted B's epoch, refuses it.
func toolRefusesPausedAgent(r *script) {
	actors := r.startWithTool("A", "B")
	a, b := actors[0], actors[1]
	expiry := r.def.Params.TTL
	r.at(0).acquire(a)
	r.callTool(a, "op-1", r.def.Params.ValueA)
	r.pause(a)
	r.at(expiry - 1).acquire(b) // refused: A's lease is live until its expiry tick
	r.at(expiry).acquire(b)     // granted, epoch 2
	r.callTool(b, "op-1", r.def.Params.ValueB)
	r.callTool(b, "op-2", r.def.Params.ConflictingValueB) // many operations per tenure
	r.resumeBare(a)
	r.callTool(a, "op-2", r.def.Params.ValueA) // stale: the tool has admitted epoch 2
	r.exit(b)
	r.exit(a)
}

// toolReplaysRetriedCall: a retry after a lost answer is answered from
// the record, not done again.
func toolReplaysRetriedCall(r *script) {
	a := r.startWithTool("A")[0]
	r.at(0).acquire(a)
	r.callToolAnswerLost(a, "op-1", r.def.Params.ValueA) // done, but A never learns it
	r.callTool(a, "op-1", r.def.Params.ValueA)           // replay: the stored answer
	r.exit(a)
}

// toolRejectsConflictingKey: a key names one operation; another request
// under it is refused.
func toolRejectsConflictingKey(r *script) {
	b := r.startWithTool("B")[0]
	r.at(0).acquire(b)
	r.callTool(b, "op-1", r.def.Params.ValueB)
	r.callTool(b, "op-1", r.def.Params.ConflictingValueB) // conflict
	r.callTool(b, "op-2", r.def.Params.ConflictingValueB) // its own key: done
	r.exit(b)
}
