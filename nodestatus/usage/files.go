package usage

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// readUint reads a file holding one unsigned number ("max" is no number:
// ok false).
func readUint(path string) (uint64, bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, err
	}
	return v, true, nil
}

// readKeyed reads a "key value" file (memory.stat, cpu.stat, vmstat) or a
// "Key: value kB" file (meminfo, with unit kB scaled to bytes), keeping the
// keys that want lists.
func readKeyed(path string, want map[string]*uint64) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for line := range bytes.Lines(b) {
		f := bytes.Fields(line)
		if len(f) < 2 {
			continue
		}
		key := string(bytes.TrimSuffix(f[0], []byte(":")))
		dst, ok := want[key]
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 2 && string(f[2]) == "kB" {
			v *= 1024
		}
		*dst = v
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

// scanLines calls fn for each line of path.
func scanLines(path string, fn func(line string)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fn(sc.Text())
	}
	return sc.Err()
}

// readFileString reads a small file as a string.
func readFileString(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}
