// Package mountinfo reads the kernel's mount table (/proc/<pid>/mountinfo).
package mountinfo

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// Self is the calling process's mount table.
const Self = "/proc/self/mountinfo"

// Mount is one line of a mount table.
type Mount struct {
	// Root is the path within the filesystem mounted (a cgroup hierarchy's
	// root as this mount namespace sees it); Mountpoint where it is mounted.
	Root, Mountpoint string
	// FSType is the filesystem type (tmpfs, cgroup, cgroup2, overlay …),
	// Source what was mounted, SuperOptions the filesystem's own options
	// (for cgroup v1 hierarchies, their controllers among them).
	FSType, Source, SuperOptions string
}

// Read parses the mount table at path. Lines it cannot parse are skipped.
func Read(path string) ([]Mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 1 {
			continue
		}
		m := Mount{Root: Unescape(pf[3]), Mountpoint: Unescape(pf[4]), FSType: qf[0]}
		if len(qf) > 1 {
			m.Source = Unescape(qf[1])
		}
		if len(qf) > 2 {
			m.SuperOptions = qf[2]
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// Unescape undoes the table's octal escapes (\040 for a space, \011 tab,
// \012 newline, \134 backslash).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
