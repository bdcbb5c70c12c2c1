package command

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// stdoutName, as --output, means standard output.
const stdoutName = "-"

// outputTarget is how --output is written.
type outputTarget struct {
	// path is the file written: --output itself, or, for a symbolic
	// link to a regular file, the file the link leads to.
	path string
	// inPlace is set for a file that exists and is not a regular file (a
	// character device such as /dev/null, a FIFO): it is opened and
	// written, never replaced, since renaming over it would put a regular
	// file where the device or FIFO was.
	inPlace bool
}

// resolveOutput decides how output is written; it is called once before
// anything runs, to refuse what can never be written, and again just
// before writing, so that the decision is made on the file as it is then.
//
// A symbolic link is followed: a link to a regular file keeps the link and
// gets the atomic replacement applied to the file it leads to (replacing
// the link itself with a regular file would silently cut it); a link to a
// device or FIFO is written in place like the device or FIFO itself.
func resolveOutput(output string) (outputTarget, error) {
	info, err := os.Stat(output) // follows links
	switch {
	case errors.Is(err, os.ErrNotExist):
		if _, lerr := os.Lstat(output); lerr == nil {
			return outputTarget{}, fmt.Errorf("--output %s is a symbolic link to a missing file", output)
		}
		dir := filepath.Dir(output)
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			return outputTarget{}, fmt.Errorf("--output directory %s does not exist", dir)
		}
		return outputTarget{path: output}, nil
	case err != nil:
		return outputTarget{}, fmt.Errorf("--output %s: %w", output, err)
	case info.IsDir():
		return outputTarget{}, fmt.Errorf("--output %s is a directory", output)
	case !info.Mode().IsRegular():
		return outputTarget{path: output, inPlace: true}, nil
	}
	target, err := filepath.EvalSymlinks(output)
	if err != nil {
		return outputTarget{}, fmt.Errorf("--output %s: %w", output, err)
	}
	return outputTarget{path: target}, nil
}

// checkOutputPath refuses, before anything runs, an output that can never
// be written or that would overwrite the file being checked.
func checkOutputPath(output, check string) error {
	target, err := resolveOutput(output)
	if err != nil {
		return err
	}
	if err := checkWritable(output, target); err != nil {
		return err
	}
	if check == "" {
		return nil
	}
	same := filepath.Clean(output) == filepath.Clean(check)
	if outInfo, err := os.Stat(output); err == nil {
		if checkInfo, err := os.Stat(check); err == nil && os.SameFile(outInfo, checkInfo) {
			same = true
		}
	}
	if same {
		return fmt.Errorf("--output and --check name the same file %s; the file being checked is never overwritten", check)
	}
	return nil
}

// checkWritable finds out, before anything runs, whether target can be
// written as writeOutput will write it, and leaves nothing behind. A file
// replaced atomically needs a new file beside it: one is created and
// removed, in the same directory and under the same kind of name as
// writeFileAtomically's. A device or FIFO, written in place, is asked
// whether this process may write it, without opening it (opening a FIFO
// waits for its reader).
func checkWritable(output string, target outputTarget) error {
	if target.inPlace {
		if err := mayWrite(target.path); err != nil {
			return fmt.Errorf("--output %s cannot be written: %w", output, err)
		}
		return nil
	}
	dir := filepath.Dir(target.path)
	probe, err := os.CreateTemp(dir, "."+filepath.Base(target.path)+".*")
	if err != nil {
		var pathErr *os.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err // the probe's random name says nothing
		}
		return fmt.Errorf("--output %s cannot be written: no new file can be made in %s: %w", output, dir, err)
	}
	return errors.Join(probe.Close(), os.Remove(probe.Name()))
}

// writeOutput writes data to output ("-" or "" being stdout).
func writeOutput(output string, stdout io.Writer, data []byte) error {
	if output == "" || output == stdoutName {
		_, err := stdout.Write(data)
		return err
	}
	target, err := resolveOutput(output)
	if err != nil {
		return err
	}
	if target.inPlace {
		return writeInPlace(target.path, data)
	}
	return writeFileAtomically(target.path, data)
}

// writeInPlace writes data to a file that is not a regular file. Opening a
// FIFO waits for its reader, as a shell redirection does.
func writeInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// writeFileAtomically replaces the regular file path only once the whole
// content is on disk, so an interrupted run never leaves half a file. It
// never renames over anything but a regular file: a device, FIFO,
// directory or symbolic link found at path, just before the rename, is
// refused and left as it was.
func writeFileAtomically(path string, data []byte) error {
	if err := refuseIrregular(path); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Close())
	if err == nil {
		err = refuseIrregular(path)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return errors.Join(err, os.Remove(tmp.Name()))
	}
	return nil
}

// refuseIrregular fails unless path is missing or a regular file (not
// followed if it is a link).
func refuseIrregular(path string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s); it is never replaced", path, info.Mode().Type())
	}
	return nil
}
