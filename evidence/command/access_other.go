//go:build !unix

package command

// mayWrite says yes where there is no access(2) (Windows): a device
// written in place (NUL) fails, if it fails, when it is written.
func mayWrite(string) error { return nil }
