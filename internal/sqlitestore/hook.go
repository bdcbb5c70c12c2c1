package sqlitestore

// HookInsideTransaction, when set by a test, runs
// inside an operation's transaction: after its read and before its write
// (named for the operation: "acquire", "write", "observe"), and after its
// write and before COMMIT ("acquire-written", "write-written"). Tests use
// it to hold a transaction open, to prove that no other process can slip a
// write in between, or to kill a process in the middle of one. It is nil
// in every real build.
var HookInsideTransaction func(operation string)

func pauseInsideTransaction(operation string) {
	if hook := HookInsideTransaction; hook != nil {
		hook(operation)
	}
}
