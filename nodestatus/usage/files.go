package usage

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// reader reads the small kernel files a sample reads by the hundred
// (cgroup and proc files, whose size stat does not tell) whole into one
// buffer it keeps: an open, two reads and a close each, where os.ReadFile
// also stats the file and grows a new buffer from 512 bytes. Not safe for
// concurrent use; what read returns is valid until the next read.
type reader struct{ buf []byte }

const (
	readerBuf     = 8 << 10  // the buffer's size
	readerMaxKept = 64 << 10 // a buffer grown past this is not kept
)

// read returns the content of the file at path.
func (r *reader) read(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if r.buf == nil {
		r.buf = make([]byte, readerBuf)
	}
	n := 0
	for {
		if n == len(r.buf) {
			r.buf = append(r.buf, make([]byte, len(r.buf))...)
		}
		m, err := f.Read(r.buf[n:])
		n += m
		if err == io.EOF {
			b := r.buf[:n]
			if len(r.buf) > readerMaxKept {
				r.buf = nil // b is the caller's alone
			}
			return b, nil
		}
		if err != nil {
			return nil, err
		}
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
