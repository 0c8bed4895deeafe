package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// lockInstance creates this instance's lock file and holds an exclusive
// flock on it. The file is locked under a temporary name, then renamed into
// place, so no other instance ever sees it unlocked (and takes it for dead).
func lockInstance(dir, id string) (*os.File, error) {
	final := filepath.Join(dir, instancesDir, id+".lock")
	tmp := final + ".new"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("lock %s: %w", tmp, err)
	}
	fmt.Fprintf(f, "%d\n", os.Getpid())
	if err := os.Rename(tmp, final); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return f, nil
}

// unlockInstance ends an instance: its file goes, then its lock.
func unlockInstance(f *os.File) {
	os.Remove(f.Name())
	f.Close()
}

// alive reports whether the instance id still runs: its lock file exists and
// someone holds its flock. A dead instance's leftover file is removed.
func alive(dir, id string) (bool, error) {
	path := filepath.Join(dir, instancesDir, id+".lock")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("check instance %s: %w", id, err)
	}
	os.Remove(path)
	return false, nil
}
