package usage

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// reader reads the small kernel files a sample reads by the hundred
// (cgroup and proc files, whose size stat does not tell) whole into one
// buffer it keeps, with the system calls alone: an open, the reads and a
// close each, where an os.File also tries to register the file with the
// network poller and os.ReadFile stats it and grows a new buffer from 512
// bytes. Not safe for concurrent use; what read returns is valid until the
// next read.
type reader struct{ buf []byte }

const (
	readerBuf     = 8 << 10  // the buffer's size
	readerMaxKept = 64 << 10 // a buffer grown past this is not kept
)

// read returns the content of the file at path.
func (r *reader) read(path string) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	if r.buf == nil {
		r.buf = make([]byte, readerBuf)
	}
	n := 0
	for {
		if n == len(r.buf) {
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		m, err := syscall.Read(fd, r.buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			b := r.buf[:n]
			if len(r.buf) > readerMaxKept {
				r.buf = nil // b is the caller's alone
			}
			return b, nil
		}
		n += m
	}
}

// uint reads a file holding one unsigned number ("max" is no number: ok
// false).
func (r *reader) uint(path string) (uint64, bool, error) {
	b, err := r.read(path)
	if err != nil {
		return 0, false, err
	}
	b = bytes.TrimSpace(b)
	if string(b) == "max" {
		return 0, false, nil
	}
	v, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, false, err
	}
	return v, true, nil
}

// keyed reads a "key value" file (memory.stat, cpu.stat, vmstat) or a
// "Key: value kB" file (meminfo, with unit kB scaled to bytes), keeping the
// keys that want lists.
func (r *reader) keyed(path string, want map[string]*uint64) error {
	b, err := r.read(path)
	if err != nil {
		return err
	}
	for line := range bytes.Lines(b) {
		key, rest := cutSpace(bytes.TrimSpace(line))
		dst, ok := want[string(bytes.TrimSuffix(key, []byte(":")))]
		if !ok {
			continue
		}
		num, unit := cutSpace(rest)
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			continue
		}
		if string(bytes.TrimSpace(unit)) == "kB" {
			v *= 1024
		}
		*dst = v
	}
	return nil
}

// cutSpace splits b at its first run of spaces and tabs.
func cutSpace(b []byte) (before, after []byte) {
	i := bytes.IndexAny(b, " \t")
	if i < 0 {
		return b, nil
	}
	return b[:i], bytes.TrimLeft(b[i:], " \t")
}

// lines calls fn for each line of the file at path, its newline left on.
func (r *reader) lines(path string, fn func(line string)) error {
	b, err := r.read(path)
	if err != nil {
		return err
	}
	for line := range strings.Lines(string(b)) {
		fn(line)
	}
	return nil
}

// exists reports whether path exists.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// dirUsage sums the sizes of the regular files in dir and its
// subdirectories and counts them; a missing dir is zero use.
func dirUsage(dir string) (bytes, inodes uint64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		inodes++
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				bytes += uint64(info.Size())
			}
		}
		return nil
	})
	return bytes, inodes, err
}
