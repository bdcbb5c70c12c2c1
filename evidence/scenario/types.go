package scenario

import (
	"leases"
	"leases/evidence/backend"
)

// Scenario is one schedule run with real processes on a fresh database.
type Scenario struct {
	Name        string           `json:"name"`
	Description string           `json:"description"`
	Receiver    backend.Receiver `json:"receiver"`
	Parameters  Parameters       `json:"parameters"`
	Steps       []Step           `json:"steps"`
	Final       *leases.Record   `json:"final_receiver_state"`
	// FinalToolEffects are the tool's effects at the end, in the order
	// they were done: only a scenario with a tool server has them.
	FinalToolEffects []ToolEffect `json:"final_tool_effects,omitempty"`
	Verdicts         Verdicts     `json:"verdicts"`
}

// Parameters are the scenario's fixed inputs.
type Parameters struct {
	Resource string `json:"resource"`
	// TTL is every lease's time-to-live in ticks.
	TTL int64 `json:"ttl"`
	// ValueA and ValueB are what A and B write; ConflictingValueB is the
	// different value B sends at its own epoch to show a conflict.
	ValueA            string `json:"value_a"`
	ValueB            string `json:"value_b"`
	ConflictingValueB string `json:"conflicting_value_b,omitempty"`
	// SessionMargin is the margin of a session that holds A's lease: the
	// session ends that many ticks before the lease's expiry.
	SessionMargin int64 `json:"session_margin,omitempty"`
}

// Step is one action of one worker, in the order the controller ran them.
type Step struct {
	Actor     string `json:"actor"`
	Operation string `json:"operation"`
	// Tick is the controller's logical clock when the step ran.
	Tick int64 `json:"tick"`
	// Epoch is the epoch granted (acquire) or carried (write).
	Epoch int64 `json:"epoch,omitempty"`
	// ExpiresAt is the granted lease's expiry tick (acquire).
	ExpiresAt int64  `json:"expires_at,omitempty"`
	Value     string `json:"value,omitempty"`
	// Outcome is granted or refused (acquire); accepted, replay, conflict
	// or stale (write, observe, call-tool); answer-lost (call-tool); read
	// (read); exited (exit).
	Outcome string `json:"outcome"`
	// Detail is the authority's reason for a refusal.
	Detail string `json:"detail,omitempty"`
	// HighestEpochGranted is the highest epoch the authority had granted
	// for the resource when the step finished.
	HighestEpochGranted int64 `json:"highest_epoch_granted"`
	// ReceiverAfter is the receiver's record after the step, read by the
	// controller in a transaction of its own; null while nothing is stored.
	ReceiverAfter *leases.Record `json:"receiver_after"`
	// Key is a tool call's operation key (Idempotency-Key).
	Key string `json:"key,omitempty"`
	// Status is the HTTP status of the tool's answer; NewestEpoch the
	// newest epoch the tool had admitted, which a stale call's answer
	// names (Leases-Newest-Epoch).
	Status      int   `json:"status,omitempty"`
	NewestEpoch int64 `json:"newest_epoch,omitempty"`
	// ToolEffectsAfter are the tool's effects after a tool call, read by
	// the controller from the tool's database.
	ToolEffectsAfter []ToolEffect `json:"tool_effects_after,omitempty"`
}

// ToolEffect is one effect the tool server did: a row it wrote, in the
// transaction of its record, for the operation (epoch, key).
type ToolEffect struct {
	Epoch int64  `json:"epoch"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Operations of a step.
const (
	OpAcquire    = "acquire"
	OpSession    = "start-session" // acquire, then keep the lease with a session
	OpWrite      = "write"
	OpFence      = "fence"
	OpRead       = "read"
	OpPause      = "pause"  // SIGSTOP
	OpResume     = "resume" // SIGCONT, and the worker's clock moves to now
	OpExit       = "exit"
	OpStopLeader = "stop-leader"    // the cluster's leader member stops
	OpRestart    = "restart-member" // it starts again and catches up
	OpReadMember = "read-member"    // a read served by one member alone
	OpCallTool   = "call-tool"      // an HTTP call of the tool server, with the lease's headers
)

// ToolActor is the actor of the tool server's own steps (its start).
const ToolActor = "tool"

// ClusterActor is the actor of the steps done to the cluster itself.
const ClusterActor = "cluster"

// Step outcomes that are not receiver outcomes.
const (
	OutcomeGranted   = "granted"
	OutcomeRefused   = "refused"
	OutcomeRead      = "read"
	OutcomeExited    = "exited"
	OutcomeStopped   = "stopped"
	OutcomeRestarted = "restarted"
	OutcomeHolding   = "holding"   // the session survived the resume
	OutcomeEnded     = "ended"     // the session had ended by then
	OutcomeNotSent   = "not-sent"  // the session had ended: the write was never sent
	OutcomeContinued = "continued" // a worker without a session runs again (SIGCONT)
	OutcomeServing   = "serving"   // the tool server listens
	OutcomeLost      = "answer-lost"
)
