//go:build !linux

package toolchaos_test

import "testing"

// TestToolPathUnderChaos needs Linux: SIGSTOP, and children that die
// with the test.
func TestToolPathUnderChaos(t *testing.T) {
	serverRole.MaySkip()
	agentRole.MaySkip()
	t.Skip("the tool path's chaos test runs on Linux")
}
