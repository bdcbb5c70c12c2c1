//go:build !unix

package etcdcommand_test

import "os/exec"

// setProcessGroup does nothing here; a hung run's command is killed, and
// its workers and members exit when their input ends.
func setProcessGroup(*exec.Cmd) {}

func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
