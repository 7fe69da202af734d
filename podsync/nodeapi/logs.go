package nodeapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodekit/nodekit/podsync"
)

// LogOptions are the query parameters of /containerLogs, as kubectl logs
// sends them.
type LogOptions struct {
	// TailLines, when >= 0, starts at the last TailLines lines. -1: all.
	TailLines int64
	// Since, when not zero, skips lines logged before it (sinceSeconds,
	// sinceTime).
	Since time.Time
	// Timestamps prefixes each line with the time it was logged
	// (RFC3339Nano).
	Timestamps bool
	// LimitBytes, when > 0, ends the output after that many bytes.
	LimitBytes int64
	// Previous reads the log of the container's previous run.
	Previous bool
	// Follow keeps reading as the log grows, until the request ends or
	// the container restarts.
	Follow bool
}

// ParseLogOptions reads LogOptions from a /containerLogs query, relative
// to now for sinceSeconds. Bad values are errors (a 400).
func ParseLogOptions(q map[string][]string, now time.Time) (LogOptions, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	o := LogOptions{TailLines: -1}
	var err error
	boolean := func(k string) bool {
		v := get(k)
		if v == "" || err != nil {
			return false
		}
		b, e := strconv.ParseBool(v)
		if e != nil {
			err = fmt.Errorf("%s: %w", k, e)
		}
		return b
	}
	integer := func(k string, min int64) (int64, bool) {
		v := get(k)
		if v == "" || err != nil {
			return 0, false
		}
		n, e := strconv.ParseInt(v, 10, 64)
		if e != nil || n < min {
			err = fmt.Errorf("%s %q: want an integer >= %d", k, v, min)
			return 0, false
		}
		return n, true
	}
	o.Timestamps = boolean("timestamps")
	o.Previous = boolean("previous")
	o.Follow = boolean("follow")
	if n, ok := integer("tailLines", 0); ok {
		o.TailLines = n
	}
	if n, ok := integer("limitBytes", 1); ok {
		o.LimitBytes = n
	}
	if n, ok := integer("sinceSeconds", 1); ok {
		o.Since = now.Add(-time.Duration(n) * time.Second)
	}
	if v := get("sinceTime"); v != "" && err == nil {
		if get("sinceSeconds") != "" {
			return o, errors.New("at most one of sinceTime and sinceSeconds")
		}
		t, e := time.Parse(time.RFC3339, v)
		if e != nil {
			return o, fmt.Errorf("sinceTime: %w", e)
		}
		o.Since = t
	}
	return o, err
}

// nameRE is what a namespace, pod or container name may look like (a DNS
// subdomain); anything else, such as "..", is refused before it reaches a
// path.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

func validName(s string) bool { return nameRE.MatchString(s) && !strings.Contains(s, "..") }

func (h *Handler) containerLogs(w http.ResponseWriter, r *http.Request) {
	if !readOnly(w, r) {
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
	if len(parts) != 3 || !validName(parts[0]) || !validName(parts[1]) || !validName(parts[2]) {
		http.Error(w, "want /containerLogs/<namespace>/<pod>/<container> with valid names", http.StatusBadRequest)
		return
	}
	ns, name, ctr := parts[0], parts[1], parts[2]
	opts, err := ParseLogOptions(r.URL.Query(), h.opts.Clock.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if h.opts.Logs != nil {
		h.servedLogs(w, r, ns, name, ctr, opts)
		return
	}
	dir, err := h.podLogDir(r.Context(), ns, name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	cdir := filepath.Join(dir, ctr)
	runs := logRuns(cdir)
	if len(runs) == 0 {
		http.Error(w, fmt.Sprintf("container %q in pod %s/%s has no log", ctr, ns, name), http.StatusNotFound)
		return
	}
	run := runs[len(runs)-1]
	if opts.Previous {
		if len(runs) < 2 {
			http.Error(w, fmt.Sprintf("previous terminated container %q in pod %s/%s not found", ctr, ns, name), http.StatusBadRequest)
			return
		}
		run = runs[len(runs)-2]
		opts.Follow = false
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	lw := &logWriter{w: w, limit: opts.LimitBytes, timestamps: opts.Timestamps, newLine: true}
	if f, ok := w.(http.Flusher); ok {
		lw.flush = f.Flush
	}
	_ = h.readLog(r.Context(), cdir, run, opts, lw)
}

// podLogDir finds the log directory of a pod: through Options.Pods for its
// UID, or else the one directory <namespace>_<name>_* there is.
func (h *Handler) podLogDir(ctx context.Context, ns, name string) (string, error) {
	for _, p := range h.listPods(ctx) {
		if p.Namespace == ns && p.Name == name {
			return podsync.PodLogDir(h.opts.PodLogRoot, p), nil
		}
	}
	matches, _ := filepath.Glob(filepath.Join(h.opts.PodLogRoot, ns+"_"+name+"_*"))
	var dirs []string
	for _, m := range matches {
		// A UID has no "_": a longer match is another pod's name.
		if rest := strings.TrimPrefix(filepath.Base(m), ns+"_"+name+"_"); !strings.Contains(rest, "_") {
			dirs = append(dirs, m)
		}
	}
	if len(dirs) == 1 {
		return dirs[0], nil
	}
	return "", fmt.Errorf("pod %s/%s not found", ns, name)
}

// logRuns lists the restart counts that have a <n>.log in dir, ascending.
func logRuns(dir string) []int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		s, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(s); err == nil && n >= 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// errLimit ends the output when LimitBytes are written.
var errLimit = errors.New("limit reached")

// logWriter writes log messages, prefixing lines with their times when
// asked, up to a byte limit.
type logWriter struct {
	w          io.Writer
	flush      func()
	limit      int64 // 0: none
	written    int64
	timestamps bool
	newLine    bool // the next message starts a line
}

func (lw *logWriter) write(b []byte) error {
	if lw.limit > 0 {
		left := lw.limit - lw.written
		if int64(len(b)) >= left {
			b = b[:left]
			n, _ := lw.w.Write(b)
			lw.written += int64(n)
			return errLimit
		}
	}
	n, err := lw.w.Write(b)
	lw.written += int64(n)
	return err
}

// entry writes one CRI log entry: its message, with a newline when the
// entry is full (F) and not when it is partial (P).
func (lw *logWriter) entry(ts []byte, msg []byte, full bool) error {
	if lw.timestamps && lw.newLine {
		if err := lw.write(ts); err != nil {
			return err
		}
		if err := lw.write([]byte{' '}); err != nil {
			return err
		}
	}
	if err := lw.write(msg); err != nil {
		return err
	}
	lw.newLine = full
	if full {
		return lw.write([]byte{'\n'})
	}
	return nil
}

// parseCRILog splits a CRI log line "<time> <stream> <P|F> <message>"
// (without its newline). An older line without the tag is a full line.
func parseCRILog(line []byte) (ts time.Time, tsRaw, msg []byte, full bool, err error) {
	i := bytes.IndexByte(line, ' ')
	if i < 0 {
		return ts, nil, nil, false, errors.New("no timestamp")
	}
	tsRaw = line[:i]
	ts, err = time.Parse(time.RFC3339Nano, string(tsRaw))
	if err != nil {
		return ts, nil, nil, false, err
	}
	rest := line[i+1:]
	j := bytes.IndexByte(rest, ' ')
	if j < 0 {
		return ts, tsRaw, nil, false, errors.New("no stream")
	}
	rest = rest[j+1:]
	full = true
	if len(rest) >= 2 && (rest[0] == 'P' || rest[0] == 'F') && rest[1] == ' ' {
		full = rest[0] == 'F'
		rest = rest[2:]
	} else if len(rest) == 1 && (rest[0] == 'P' || rest[0] == 'F') {
		full = rest[0] == 'F'
		rest = nil
	}
	return ts, tsRaw, rest, full, nil
}

// tailOffset returns the offset of the start of the last n lines of f.
func tailOffset(f *os.File, n int64) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	if n == 0 {
		return size, nil
	}
	const chunk = 32 << 10
	buf := make([]byte, chunk)
	pos := size
	var lines int64
	skipLast := true // a final newline ends the last line, it starts none
	for pos > 0 {
		m := int64(chunk)
		if pos < m {
			m = pos
		}
		pos -= m
		if _, err := f.ReadAt(buf[:m], pos); err != nil && err != io.EOF {
			return 0, err
		}
		for i := m - 1; i >= 0; i-- {
			if buf[i] != '\n' {
				continue
			}
			if skipLast && pos+i == size-1 {
				continue
			}
			lines++
			if lines == n {
				return pos + i + 1, nil
			}
		}
		skipLast = false
	}
	return 0, nil
}

// readLog writes the log of run <cdir>/<run>.log as opts ask; with Follow,
// it keeps polling the file on the clock, reopening it when it was rotated
// (renamed away and created anew), until ctx ends or the container starts
// a newer run.
func (h *Handler) readLog(ctx context.Context, cdir string, run int, opts LogOptions, lw *logWriter) error {
	path := filepath.Join(cdir, strconv.Itoa(run)+".log")
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { f.Close() }()
	if opts.TailLines >= 0 {
		off, err := tailOffset(f, opts.TailLines)
		if err != nil {
			return err
		}
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return err
		}
	}
	rd := bufio.NewReaderSize(f, 32<<10)
	var pending []byte // a line not yet ended by a newline
	for {
		line, err := rd.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			pending = append(pending, line...)
			continue
		}
		if len(line) > 0 && err == nil {
			if len(pending) > 0 {
				line = append(pending, line...)
				pending = pending[:0]
			}
			ts, tsRaw, msg, full, perr := parseCRILog(bytes.TrimSuffix(line, []byte{'\n'}))
			if perr == nil && (opts.Since.IsZero() || !ts.Before(opts.Since)) {
				if werr := lw.entry(tsRaw, msg, full); werr != nil {
					return werr
				}
			}
			continue
		}
		if err != io.EOF {
			return err
		}
		pending = append(pending, line...)
		// At the end of what is there.
		if lw.flush != nil {
			lw.flush()
		}
		if !opts.Follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.opts.Clock.After(h.opts.FollowInterval):
		}
		if rotated(f, path) {
			// Finish the old file (a writer may have added to it before
			// the rename), then go on with the new one from its start.
			if more, _ := io.ReadAll(rd); len(more) > 0 {
				rd = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(more), eofReader{}), 32<<10)
				continue
			}
			nf, err := os.Open(path)
			if err != nil {
				continue // not created yet
			}
			f.Close()
			f = nf
			rd.Reset(f)
			pending = pending[:0]
			continue
		}
		if runs := logRuns(cdir); len(runs) > 0 && runs[len(runs)-1] > run {
			return nil // the container restarted: its next run has its own log
		}
	}
}

// eofReader is an empty reader, to finish the rest of a rotated file.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// rotated reports whether path no longer names the open file f.
func rotated(f *os.File, path string) bool {
	st, err := os.Stat(path)
	if err != nil {
		return true
	}
	fst, err := f.Stat()
	if err != nil {
		return true
	}
	return !os.SameFile(st, fst)
}

// servedLogs answers /containerLogs from Options.Logs.
func (h *Handler) servedLogs(w http.ResponseWriter, r *http.Request, ns, name, ctr string, opts LogOptions) {
	lines, err := h.opts.Logs(r.Context(), ns, name, ctr, opts.Previous)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if !opts.Since.IsZero() {
		kept := lines[:0:0]
		for _, l := range lines {
			if !l.Time.Before(opts.Since) {
				kept = append(kept, l)
			}
		}
		lines = kept
	}
	if opts.TailLines >= 0 && int64(len(lines)) > opts.TailLines {
		lines = lines[int64(len(lines))-opts.TailLines:]
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	lw := &logWriter{w: w, limit: opts.LimitBytes, timestamps: opts.Timestamps, newLine: true}
	for _, l := range lines {
		ts := []byte(l.Time.UTC().Format(time.RFC3339Nano))
		if err := lw.entry(ts, []byte(l.Message), true); err != nil {
			return
		}
	}
}
