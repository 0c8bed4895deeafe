// Package secretfile reads the files that hold secrets (bearer tokens, API
// keys, a DSN with its password, private keys) and refuses one its group or
// others may open, as ssh refuses such a private key: every secret file of
// agentd goes through Check or Read, so each is refused alike.
package secretfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// ErrMode is the error (wrapped, with the file and its mode) for a secret
// file its group or others may open.
var ErrMode = errors.New("secretfile: the file is open to its group or others")

// checkInfo refuses fi unless its mode gives its group and others no access,
// with one exception: a file owned by root may be readable by its group (mode
// 0640 or 0440), which is how a Kubernetes secret volume with an fsGroup
// hands a file to a non-root process (PostgreSQL allows its key file the same
// way).
func checkInfo(path string, fi fs.FileInfo) error {
	mode := fi.Mode().Perm()
	if mode&0o077 == 0 {
		return nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 0 && mode&0o037 == 0 {
		return nil // root's, read-only to its group
	}
	return fmt.Errorf("%w: %s has mode %04o; chmod 600 it (or make it root's and 640)", ErrMode, path, mode)
}

// Check refuses (with an error wrapping ErrMode) the secret file at path when
// its group or others may open it (see Read for the one exception). The mode
// checked is the file's, through symbolic links (a Kubernetes secret volume
// links each key to its file). An error from stat is returned as it is.
func Check(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return checkInfo(path, fi)
}

// Read returns the content of the secret file at path, which must be closed
// to its group and others: mode 0600 or 0400 (0700 too), or a file owned by
// root and readable by its group only (0640, 0440). Otherwise the error wraps
// ErrMode and names the file and its mode. The mode checked is that of the
// file opened, so a file replaced between the check and the read cannot slip
// through.
func Read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkInfo(path, fi); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// Token reads a secret that is one line, such as a bearer token, from the
// file at path (as Read does: refused when its group or others may open it):
// the line without the white space around it, which must not be empty.
func Token(path string) (string, error) {
	b, err := Read(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, "\r\n") {
		return "", fmt.Errorf("%s: want one non-empty line", path)
	}
	return tok, nil
}
