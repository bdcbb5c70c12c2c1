//go:build !unix

package main

import "os/exec"

// inOwnProcessGroup leaves cmd as it is: without process groups to kill
// (Windows), its context's end kills go test alone.
func inOwnProcessGroup(*exec.Cmd) {}

// killProcessGroup kills the process cmd started.
func killProcessGroup(cmd *exec.Cmd) error { return cmd.Process.Kill() }
