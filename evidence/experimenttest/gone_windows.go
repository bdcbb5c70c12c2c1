package experimenttest

import "syscall"

// ProcessGone reports whether no process with pid exists any more: none
// can be opened, or the one opened has exited (an exited process lives on
// while a handle to it is open).
func ProcessGone(pid int) bool {
	h, err := syscall.OpenProcess(syscall.SYNCHRONIZE, false, uint32(pid))
	if err != nil {
		return true
	}
	defer syscall.CloseHandle(h)
	event, err := syscall.WaitForSingleObject(h, 0)
	return err == nil && event == syscall.WAIT_OBJECT_0
}
