package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallFS mounts a tmpfs of size bytes (mode 0700) on a new temporary
// directory and unmounts it when the test ends, or skips the test, saying
// why, where the kernel refuses the mount (not root, no mount namespace).
func SmallFS(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Skipf("no small file system to fill here (mount tmpfs: %v)", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// Fill writes a file in dir until its file system is full, then truncates
// it to leave room bytes free, and returns the file's path: removing the
// file gives the room back.
func Fill(t testing.TB, dir string, room int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	var n int64
	for {
		m, err := f.Write(chunk)
		n += int64(m)
		if err != nil {
			break
		}
	}
	if err := f.Truncate(max(n-room, 0)); err != nil {
		t.Fatal(err)
	}
	return path
}
