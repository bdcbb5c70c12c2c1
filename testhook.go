package leases

// testHookInsideTransaction, when set by a test (export_test.go), runs
// inside an operation's transaction after its read and before its write.
// Tests use it to hold a transaction open and prove that no other process
// can slip a write in between; it is nil in every real build.
var testHookInsideTransaction func(operation string)

func pauseInsideTransaction(operation string) {
	if hook := testHookInsideTransaction; hook != nil {
		hook(operation)
	}
}
