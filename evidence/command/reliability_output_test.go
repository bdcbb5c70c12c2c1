//go:build unix

package command_test

// Where the command's --output may point: standard output, a FIFO, a
// device, a link. A file that is not a regular file is written in place and
// never renamed over. Unix only: Windows has no FIFO or device node in its
// file system. Not among the contract's 17 tests.

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"leases/evidence/experimenttest"
	"leases/testkit/testctx"
)

func TestCommandOutputOntoSpecialFiles(t *testing.T) {
	experimenttest.SkipWithoutStop(t)
	t.Chdir(t.TempDir()) // a "-" taken for a file name would land here
	code, want, stderr := experimenttest.RunCommand(t, append(experimenttest.SmallBounds, "--output", "-")...)
	if code != 0 || want == "" {
		t.Fatalf("--output -: exit %d, %d bytes on stdout; stderr:\n%s", code, len(want), stderr)
	}
	if _, err := os.Lstat("-"); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("--output - wrote a file called -")
	}

	t.Run("a FIFO, read while the command writes", func(t *testing.T) {
		dir := t.TempDir()
		fifo, sameFIFO := filepath.Join(dir, "out.fifo"), filepath.Join(dir, "same.fifo")
		// A second name for the FIFO reaches it even if the command
		// replaces the first.
		if err := errors.Join(syscall.Mkfifo(fifo, 0o600), os.Link(fifo, sameFIFO)); err != nil {
			t.Fatal(err)
		}
		type result struct {
			data []byte
			err  error
		}
		read := make(chan result, 1)
		go func() {
			data, err := os.ReadFile(fifo) // waits for a writer, reads to its end
			read <- result{data, err}
		}()
		code, _, stderr := experimenttest.RunCommand(t, append(experimenttest.SmallBounds, "--output", fifo)...)
		// A command that never opened the FIFO leaves the reader waiting
		// for a writer: be that writer, with nothing to say.
		if w, err := os.OpenFile(sameFIFO, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
		var got result
		select {
		case got = <-read:
		case <-testctx.Context(t).Done():
			t.Fatal("the FIFO's reader never finished")
		}
		if code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr)
		}
		if got.err != nil || string(got.data) != want {
			t.Fatalf("read %d bytes from the FIFO (%v), want the %d of --output -", len(got.data), got.err, len(want))
		}
		if info, err := os.Lstat(fifo); err != nil || info.Mode().Type() != os.ModeNamedPipe {
			t.Fatalf("the FIFO is now %v (%v)", info.Mode(), err)
		}
	})

	t.Run("a device node, still the same device afterwards", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("creating a device node needs root")
		}
		null, err := os.Stat(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		devNullNumbers := int(null.Sys().(*syscall.Stat_t).Rdev) // its major and minor numbers, which differ between systems
		dev := filepath.Join(t.TempDir(), "null")
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, devNullNumbers); err != nil {
			t.Skipf("cannot create a device node here: %v", err)
		}
		if f, err := os.OpenFile(dev, os.O_WRONLY, 0); err != nil {
			t.Skipf("cannot open a device node here (a nodev mount?): %v", err)
		} else {
			_ = f.Close()
		}
		code, _, stderr := experimenttest.RunCommand(t, append(experimenttest.SmallBounds, "--output", dev)...)
		if code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr)
		}
		info, err := os.Lstat(dev)
		if err != nil || info.Mode().Type() != os.ModeDevice|os.ModeCharDevice || int(info.Sys().(*syscall.Stat_t).Rdev) != devNullNumbers {
			t.Fatalf("the device node is now %v (%v); want the character device %s is", info.Mode(), err, os.DevNull)
		}
	})

	t.Run("a link to a regular file, still a link afterwards", func(t *testing.T) {
		dir := t.TempDir()
		experimenttest.WriteFile(t, dir, "target.json", "old")
		link := filepath.Join(dir, "link.json")
		if err := os.Symlink("target.json", link); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := experimenttest.RunCommand(t, append(experimenttest.SmallBounds, "--output", link)...)
		if code != 0 {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr)
		}
		if to, err := os.Readlink(link); err != nil || to != "target.json" {
			t.Fatalf("the link now leads to %q (%v)", to, err)
		}
		if got, err := os.ReadFile(filepath.Join(dir, "target.json")); err != nil || string(got) != want {
			t.Fatalf("the link's target holds %d bytes (%v), want the %d of --output -", len(got), err, len(want))
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 2 {
			t.Fatalf("%d files beside the link and its target, want none: %v", len(entries)-2, entries)
		}
	})

	t.Run("--docs redraws a stale block, and never replaces a FIFO or a link", func(t *testing.T) {
		dir := t.TempDir()
		stale := "# A document\n\n<!-- generated: table agreement -->\nstale\n<!-- end -->\n"
		if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte(stale), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr := experimenttest.RunCommand(t, append(experimenttest.SmallBounds, "--output", "-", "--docs", dir)...); code != 0 || !strings.Contains(stderr, "redrew README.md") {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr)
		}
		if got, err := os.ReadFile(filepath.Join(dir, "README.md")); err != nil || strings.Contains(string(got), "stale") || !strings.Contains(string(got), "| scenario | backends |") {
			t.Fatalf("README.md after --docs:\n%s (%v)", got, err)
		}
		docs := filepath.Join(dir, "docs")
		fifo, link := filepath.Join(docs, "fifo.md"), filepath.Join(docs, "link.md")
		if err := errors.Join(os.Mkdir(docs, 0o755), syscall.Mkfifo(fifo, 0o600), os.Symlink("../README.md", link)); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := experimenttest.RunCommand(t, append(experimenttest.SmallBounds, "--output", "-", "--docs", dir)...)
		if code == 0 {
			t.Fatalf("exit 0 drawing documents that are a FIFO and a link; stderr:\n%s", stderr)
		}
		if info, err := os.Lstat(fifo); err != nil || info.Mode().Type() != os.ModeNamedPipe {
			t.Errorf("the FIFO became %v (%v)", info.Mode().Type(), err)
		}
		if to, err := os.Readlink(link); err != nil || to != "../README.md" {
			t.Errorf("the link leads to %q (%v)", to, err)
		}
	})
}
