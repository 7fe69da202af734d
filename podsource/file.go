package podsource

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// FileOptions configures a File source.
type FileOptions struct {
	// Path is a directory of manifests (not recursed into; names starting
	// with "." ignored) or one manifest file. Required. It need not exist
	// yet.
	Path string
	// NodeName is this node's name. Required.
	NodeName string
	// Period is how often the path is re-listed besides inotify. Default
	// 20s; 1s to 24h.
	Period time.Duration
	// Clock drives the re-list ticker. Default the real clock.
	Clock clock.WithTicker
	// Recorder, if set, receives a Warning event (reason InvalidManifest)
	// for each manifest that cannot be used, on the pod kept from its last
	// valid version, or on the Node when there is none. Default none.
	Recorder record.EventRecorder
}

// File is the static pod source for a manifest directory or file.
//
// Run lists the path at once, then on every inotify event (through
// fsnotify) for a manifest and every Period, and sends the full set when it
// changed. Files are read whole (at most MaxManifestBytes), one pod each, in
// YAML or JSON; see DecodeManifest. A manifest is re-parsed only when its
// bytes change.
//
// Unlike kubelet, a manifest that was valid and becomes unreadable or
// invalid keeps its last valid pod in the set; the error is logged and
// recorded as an event when it first appears and at every re-list, until
// the file is fixed or removed. A manifest never valid contributes no pod.
// When Run finds a manifest newly invalid (an empty file, as between the
// truncate and the write of a plain edit, or one cut short), on an inotify
// event or a re-list, the problem counts only if the file is still invalid
// SettleDelay later; the write's own event normally brings the new version
// first. SyncOnce, a step whose caller chooses when to look, reports at
// once; Pods returns the set it (or Run) found last.
//
// Of several files declaring the same pod (namespace and name), the one
// whose name sorts last is used, as in kubelet, whose file store is keyed by
// namespace/name and filled in file name order; the others are logged and
// listed in Errors. Entries that are not regular files (FIFOs, devices,
// sockets, directories and links to them) are never opened; they are
// logged once and listed in Errors.
//
// A path that does not exist yields an empty set; a directory that cannot
// be read keeps the last set.
type File struct {
	path     string
	nodeName string
	period   time.Duration
	clock    clock.WithTicker
	recorder record.EventRecorder
	single   bool // path was not a directory at the last re-list

	mu      sync.Mutex
	entries map[string]*fileEntry
	dups    map[string]error // files whose pod another file declares too, and loses
	pathErr error
	pods    []*v1.Pod // the set found last; nil until the path was read
}

type fileEntry struct {
	sum  uint64
	size int
	pod  *v1.Pod // from the last valid version; nil if never valid
	key  string  // pod's namespace/name
	err  error   // why the current version is not used
	// pending is set when Run found the file newly invalid: it may be
	// mid-write (truncated, then written). It is reported only if it is
	// still invalid SettleDelay after pendingSince.
	pending      bool
	pendingSince time.Time
	// skipped marks an entry that is not a regular file (a FIFO, a device,
	// a socket, a directory or a link to one); err says which.
	skipped bool
}

// SettleDelay is how long a manifest that Run found newly invalid (empty or
// cut short, as when an editor truncates the file and then writes it) may
// stay so before it counts as invalid: the write that completes it
// normally comes within milliseconds and is read on its own event. Measured
// on the File's clock.
const SettleDelay = time.Second

// NewFile checks the options and returns a File source.
func NewFile(opts FileOptions) (*File, error) {
	if opts.Path == "" {
		return nil, errors.New("podsource: FileOptions.Path: required")
	}
	if err := checkNodeName("FileOptions", &opts.NodeName); err != nil {
		return nil, err
	}
	if err := checkDuration("FileOptions.Period", &opts.Period, DefaultPeriod, MinPeriod, MaxPeriod); err != nil {
		return nil, err
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	p := filepath.Clean(opts.Path)
	return &File{
		path:     p,
		nodeName: opts.NodeName,
		period:   opts.Period,
		clock:    opts.Clock,
		recorder: opts.Recorder,
		entries:  map[string]*fileEntry{},
	}, nil
}

// Name returns FileSource.
func (f *File) Name() string { return FileSource }

// SyncOnce re-lists the path once; Pods then returns the full set. The
// error is non-nil only when the path could not be read at all (the last set
// is kept); problems with single manifests are in Errors.
func (f *File) SyncOnce(ctx context.Context) error {
	_, _, err := f.relist(ctx, false)
	return err
}

// Pods returns the full set of pods found by the last re-list or event,
// sorted by file name: what Run sent or is about to send. It is nil until
// SyncOnce or Run has read the path. The pods are shared: do not modify
// them.
func (f *File) Pods() []*v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pods == nil {
		return nil
	}
	return append([]*v1.Pod{}, f.pods...)
}

// Errors returns the current problem of each manifest that cannot be used,
// keyed by path, and of the path itself: invalid manifests (under Run, once
// they stayed invalid for SettleDelay), entries that are not regular files
// and were skipped, and files whose pod another file, sorting later,
// declares too. Every value is a *ManifestError except path-level errors.
func (f *File) Errors() map[string]error {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]error{}
	for p, e := range f.entries {
		if e.err != nil && !e.pending {
			out[p] = e.err
		}
	}
	for p, err := range f.dups {
		if _, ok := out[p]; !ok {
			out[p] = err
		}
	}
	if f.pathErr != nil {
		out[f.path] = f.pathErr
	}
	return out
}

// Run watches and re-lists the path, sending the full set first at once and
// then whenever it changes, until ctx ends.
func (f *File) Run(ctx context.Context, updates chan<- Update) error {
	logger := klog.FromContext(ctx).WithValues("source", FileSource, "path", f.path)
	ctx = klog.NewContext(ctx, logger)

	w := f.watch(logger)
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	ticker := f.clock.NewTicker(f.period)
	defer ticker.Stop()
	var (
		settleTimer clock.Timer
		settleC     <-chan time.Time
	)
	defer func() {
		if settleTimer != nil {
			settleTimer.Stop()
		}
	}()

	pods, _, err := f.relist(ctx, true)
	if err != nil {
		logger.Error(err, "Cannot read the manifest path; will retry")
	}
	if err := send(ctx, updates, Update{Op: OpSet, Source: FileSource, Pods: pods}); err != nil {
		return nil
	}
	for {
		var (
			events <-chan fsnotify.Event
			errs   <-chan error
		)
		if w != nil {
			events, errs = w.Events, w.Errors
		}
		if settleC == nil {
			if d, ok := f.nextSettle(); ok {
				settleTimer = f.clock.NewTimer(d)
				settleC = settleTimer.C()
			}
		}
		var changed bool
		select {
		case <-ctx.Done():
			return nil
		case <-settleC:
			settleC = nil
			pods, changed = f.settle(ctx)
		case <-ticker.C():
			if w == nil {
				w = f.watch(logger)
			}
			pods, changed, err = f.relist(ctx, true)
			if err != nil {
				logger.Error(err, "Cannot read the manifest path; keeping the last set")
			}
		case ev, ok := <-events:
			if !ok {
				w.Close()
				w = nil
				continue
			}
			names := map[string]bool{ev.Name: true}
		drain:
			for {
				select {
				case ev, ok := <-events:
					if !ok {
						break drain
					}
					names[ev.Name] = true
				default:
					break drain
				}
			}
			var rewatch bool
			pods, changed, rewatch = f.handleEvents(ctx, names)
			if rewatch {
				// The watched directory itself went away or moved.
				w.Close()
				w = f.watch(logger)
				pods, changed, err = f.relist(ctx, true)
				if err != nil {
					logger.Error(err, "Cannot read the manifest path; keeping the last set")
				}
			}
		case err, ok := <-errs:
			if ok {
				logger.Error(err, "Watching the manifest path failed; re-listing and watching again")
			}
			w.Close()
			w = f.watch(logger)
			pods, changed, err = f.relist(ctx, true)
			if err != nil {
				logger.Error(err, "Cannot read the manifest path; keeping the last set")
			}
		}
		if changed {
			if err := send(ctx, updates, Update{Op: OpSet, Source: FileSource, Pods: pods}); err != nil {
				return nil
			}
		}
	}
}

// watch starts an inotify watch on the directory, or on the directory
// holding the file (so a file renamed into place is seen). It returns nil
// when that is not possible yet; the next re-list tries again.
func (f *File) watch(logger klog.Logger) *fsnotify.Watcher {
	target := f.path
	if st, err := os.Stat(f.path); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			logger.V(2).Info("Cannot watch the manifest path yet", "err", err)
			return nil
		}
		// Watch the parent so the path's creation is seen as soon as it happens
		// when it is a file; a directory created later is watched after the
		// next re-list.
		target = filepath.Dir(f.path)
	} else if !st.IsDir() {
		target = filepath.Dir(f.path)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		logger.Error(err, "Cannot create an inotify watcher; relying on re-lists")
		return nil
	}
	if err := w.Add(target); err != nil {
		w.Close()
		logger.V(2).Info("Cannot watch the manifest path yet", "target", target, "err", err)
		return nil
	}
	return w
}

// handleEvents re-reads the manifests the events name. rewatch is true when
// the event concerns the watched path itself or its parent.
func (f *File) handleEvents(ctx context.Context, names map[string]bool) (pods []*v1.Pod, changed, rewatch bool) {
	logger := klog.FromContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, filepath.Clean(n))
	}
	sort.Strings(sorted)
	st, err := os.Stat(f.path)
	isDir := err == nil && st.IsDir()
	if isDir == f.single {
		// The path changed between a file and a directory: start over.
		return f.setLocked(logger), false, true
	}
	for _, name := range sorted {
		if !isDir {
			if name == f.path && f.readLocked(logger, name, true) {
				changed = true
			}
			continue
		}
		if name == f.path {
			rewatch = true
			continue
		}
		if filepath.Dir(name) != f.path || strings.HasPrefix(filepath.Base(name), ".") {
			continue
		}
		if f.readLocked(logger, name, true) {
			changed = true
		}
	}
	return f.setLocked(logger), changed, rewatch
}

// relist reads the whole path. With settle (Run's re-lists), a manifest
// newly found invalid is reported only once it stayed so for SettleDelay, as
// after an event; SyncOnce reports at once.
func (f *File) relist(ctx context.Context, settle bool) (pods []*v1.Pod, changed bool, err error) {
	logger := klog.FromContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()

	st, err := os.Stat(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f.pathErr = nil
		f.single = true
		changed = f.dropAllLocked()
		return f.setLocked(logger), changed, nil
	case err != nil:
		f.pathErr = fmt.Errorf("podsource: file %s: %w", f.path, err)
		return f.setLocked(logger), false, f.pathErr
	}
	seen := map[string]bool{}
	if st.IsDir() {
		f.single = false
		dirents, err := os.ReadDir(f.path)
		if err != nil {
			f.pathErr = fmt.Errorf("podsource: file %s: %w", f.path, err)
			return f.setLocked(logger), false, f.pathErr
		}
		for _, de := range dirents {
			name := de.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			p := filepath.Join(f.path, name)
			seen[p] = true
			if f.readLocked(logger, p, settle) {
				changed = true
			}
		}
	} else {
		f.single = true
		seen[f.path] = true
		if f.readLocked(logger, f.path, settle) {
			changed = true
		}
	}
	f.pathErr = nil
	for p, e := range f.entries {
		if !seen[p] {
			delete(f.entries, p)
			if e.pod != nil {
				changed = true
			}
		}
	}
	// Keep telling about manifests that are still broken.
	for _, p := range sortedKeys(f.entries) {
		if e := f.entries[p]; e.err != nil && !e.pending && !e.skipped {
			f.report(logger, e)
		}
	}
	return f.setLocked(logger), changed, nil
}

func sortedKeys(m map[string]*fileEntry) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (f *File) dropAllLocked() bool {
	changed := false
	for p, e := range f.entries {
		if e.pod != nil {
			changed = true
		}
		delete(f.entries, p)
	}
	return changed
}

// readLocked reads one manifest and updates its entry. It reports whether
// the set changed. With settle, a problem newly found is marked pending
// (see settle); without, the caller reports it (a re-list reports every
// error itself).
func (f *File) readLocked(logger klog.Logger, path string, settle bool) bool {
	e := f.entries[path]
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		delete(f.entries, path)
		return e != nil && e.pod != nil
	}
	if err == nil && !st.Mode().IsRegular() {
		// Never opened: reading a FIFO would block.
		skip := &ManifestError{Source: FileSource, Location: path,
			Err: fmt.Errorf("skipped: %s, not a regular file", describeMode(st.Mode()))}
		if e == nil || !e.skipped || e.err.Error() != skip.Error() {
			logger.Error(skip, "Skipping an entry of the manifest path")
		}
		f.entries[path] = &fileEntry{skipped: true, err: skip}
		return e != nil && e.pod != nil
	}
	origin := Origin{Source: FileSource, Location: path, NodeName: f.nodeName}
	var data []byte
	if err == nil {
		data, err = readManifest(path)
	}
	if errors.Is(err, fs.ErrNotExist) {
		delete(f.entries, path)
		return e != nil && e.pod != nil
	}
	if e == nil || e.skipped {
		e = &fileEntry{}
		f.entries[path] = e
	}
	if err != nil {
		if me := (*ManifestError)(nil); !errors.As(err, &me) {
			err = &ManifestError{Source: FileSource, Location: path, Err: err}
		}
		newErr := e.err == nil || e.err.Error() != err.Error()
		e.err, e.sum, e.size = err, 0, 0
		if settle && newErr {
			f.markPending(e)
		}
		return false
	}
	sum := fnvSum(data)
	if e.sum == sum && e.size == len(data) && (e.pod != nil || e.err != nil) {
		return false
	}
	e.sum, e.size = sum, len(data)
	pod, err := DecodeManifest(data, origin)
	if err != nil {
		e.err = err
		if settle {
			f.markPending(e)
		}
		return false
	}
	if e.err != nil && e.pod != nil && !e.pending {
		logger.Info("Manifest is valid again", "file", path)
	}
	e.err, e.pending = nil, false
	if e.pod != nil && e.pod.UID == pod.UID && e.pod.Annotations[ConfigHashAnnotation] == pod.Annotations[ConfigHashAnnotation] &&
		equalPods(e.pod, pod) {
		return false
	}
	e.pod, e.key = pod, pod.Namespace+"/"+pod.Name
	return true
}

// markPending defers reporting a manifest Run found newly invalid: the
// write that completes it may be on its way.
func (f *File) markPending(e *fileEntry) {
	e.pending, e.pendingSince = true, f.clock.Now()
}

// settle reports the pending manifests that stayed invalid for SettleDelay,
// re-reading them first. It returns the set and whether it changed.
func (f *File) settle(ctx context.Context) (pods []*v1.Pod, changed bool) {
	logger := klog.FromContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	for _, p := range sortedKeys(f.entries) {
		e := f.entries[p]
		if !e.pending {
			continue
		}
		if e.pendingSince.Add(SettleDelay).After(now) {
			continue
		}
		if f.readLocked(logger, p, false) {
			changed = true
		}
		if e := f.entries[p]; e != nil && e.pending {
			e.pending = false
			f.report(logger, e)
		}
	}
	return f.setLocked(logger), changed
}

// nextSettle is how long until the first pending manifest is due, and
// false when none is pending.
func (f *File) nextSettle() (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var first time.Time
	for _, e := range f.entries {
		if e.pending && (first.IsZero() || e.pendingSince.Before(first)) {
			first = e.pendingSince
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return max(first.Add(SettleDelay).Sub(f.clock.Now()), 0), true
}

// describeMode names what a non-regular directory entry is.
func describeMode(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory (not recursed into)"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return fmt.Sprintf("of mode %v", m)
}

func equalPods(a, b *v1.Pod) bool {
	return !differSemantically(a, b) && a.Name == b.Name && a.Namespace == b.Namespace
}

func (f *File) report(logger klog.Logger, e *fileEntry) {
	if e.pod != nil {
		logger.Error(e.err, "Manifest cannot be used; keeping the pod from its last valid version until it is fixed or removed", "pod", klog.KObj(e.pod))
		if f.recorder != nil {
			f.recorder.Eventf(e.pod, v1.EventTypeWarning, ReasonInvalidManifest, "%v; keeping the pod from its last valid version", e.err)
		}
		return
	}
	logger.Error(e.err, "Manifest cannot be used")
	if f.recorder != nil {
		f.recorder.Eventf(nodeRef(f.nodeName), v1.EventTypeWarning, ReasonInvalidManifest, "%v", e.err)
	}
}

// setLocked returns the current set, sorted by file name. Of several files
// declaring the same pod (namespace and name), the one whose name sorts last
// is used, as by kubelet's file source, which keys its store by
// namespace/name and fills it in file name order; the others are in f.dups.
func (f *File) setLocked(logger klog.Logger) []*v1.Pod {
	keys := sortedKeys(f.entries)
	winner := make(map[string]string, len(keys))
	for _, p := range keys {
		if e := f.entries[p]; e.pod != nil {
			winner[e.key] = p
		}
	}
	pods := make([]*v1.Pod, 0, len(f.entries))
	var dups map[string]error
	for _, p := range keys {
		e := f.entries[p]
		if e.pod == nil {
			continue
		}
		key := e.key
		if w := winner[key]; w != p {
			err := &ManifestError{Source: FileSource, Location: p,
				Err: fmt.Errorf("pod %s is declared by %s too, which is used (the file whose name sorts last wins)", key, w)}
			if old := f.dups[p]; old == nil || old.Error() != err.Error() {
				logger.Info("Manifest ignored: another file declares the same pod", "file", p, "pod", key, "used", w)
			}
			if dups == nil {
				dups = map[string]error{}
			}
			dups[p] = err
			continue
		}
		pods = append(pods, e.pod)
	}
	f.dups = dups
	f.pods = pods
	return pods
}

func readManifest(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, MaxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("manifest is larger than %d bytes", MaxManifestBytes)
	}
	return data, nil
}

func fnvSum(data []byte) uint64 {
	h := fnv.New64a()
	h.Write(data)
	return h.Sum64()
}
