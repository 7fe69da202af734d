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

	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/internal/optcheck"
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
// Run lists the path at once, then reads the manifests named by each
// inotify event (through fsnotify) and re-lists every Period, and sends the
// full set when it changed: a loop over SyncOnce, which does all of that
// while Run keeps the watch. Files are read whole (at most
// MaxManifestBytes), one pod each, in YAML or JSON; see DecodeManifest. A
// manifest is re-parsed only when its bytes change.
//
// Unlike kubelet, a manifest that was valid and becomes unreadable or
// invalid keeps its last valid pod in the set; the error is logged and
// recorded as an event when it first appears and at every re-list, until
// the file is fixed or removed. A manifest never valid contributes no pod.
// When Run finds a manifest newly invalid (an empty file, as between the
// truncate and the write of a plain edit, or one cut short), on an inotify
// event or a re-list, the problem counts only if the file is still invalid
// SettleDelay later; the write's own event normally brings the new version
// first. SyncOnce without Run, a step whose caller chooses when to look,
// re-lists and reports at once; Pods returns the set found last.
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
	version uint64    // counts the changes of pods

	stepMu     sync.Mutex // serialises the steps, and Run's start and end of its watch
	nextRelist time.Time  // Run's next periodic re-list; zero: at once

	// Run's watch, kept by the steps while Run runs.
	wmu      sync.Mutex
	watching bool
	w        *fsnotify.Watcher // nil: none yet (the next periodic re-list tries)
	wdone    chan struct{}     // closed when w's forwarder returns
	names    map[string]bool   // what w's events named since the last step
	werr     bool              // w failed: build it again at once
	werrVal  error             // w's error, if it gave one
	wgone    bool              // w's events ended: build it again at the next re-list
	wake     chan struct{}     // capacity 1: w delivered something
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
		return nil, optcheck.Required("podsource: FileOptions.Path")
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
		wake:     make(chan struct{}, 1),
	}, nil
}

// Name returns FileSource.
func (f *File) Name() string { return FileSource }

// SyncOnce is the source's step, the one Run loops over; Pods then returns
// the full set. Alone, it re-lists the path and reports every problem at
// once: nothing else would show a change. While Run watches the path, it
// does what is due: it reads the manifests the watch's events named since
// the last step, builds the watch again when it failed, re-lists the path
// every Period, and reports a manifest found newly invalid once it stayed
// so for SettleDelay. The error is non-nil only when the path could not be
// read at all (the last set is kept); problems with single manifests are in
// Errors.
func (f *File) SyncOnce(ctx context.Context) error {
	f.stepMu.Lock()
	defer f.stepMu.Unlock()
	logger := klog.FromContext(ctx)
	f.wmu.Lock()
	watching := f.watching
	names, werr, werrVal, wgone := f.names, f.werr, f.werrVal, f.wgone
	f.names, f.werr, f.werrVal, f.wgone = nil, false, nil, false
	f.wmu.Unlock()
	if !watching {
		changed, err := f.relist(ctx, false)
		f.changed(changed)
		return err
	}
	now := f.clock.Now()
	relist := !now.Before(f.nextRelist)
	if relist {
		f.nextRelist = nextTick(f.nextRelist, now, f.period)
	}
	switch {
	case werr:
		if werrVal != nil {
			logger.Error(werrVal, "Watching the manifest path failed; re-listing and watching again")
		}
		f.rewatch(logger)
		relist = true
	case wgone:
		f.unwatch()
		if relist {
			f.rewatch(logger)
		}
	case relist && !f.hasWatch():
		f.rewatch(logger)
	}
	var changed bool
	if !relist && len(names) > 0 {
		var rewatch bool
		changed, rewatch = f.handleEvents(ctx, names)
		if rewatch {
			// The watched directory itself went away or moved.
			f.rewatch(logger)
			relist = true
		}
	}
	var err error
	if relist {
		var c bool
		c, err = f.relist(ctx, true)
		changed = changed || c
	}
	if d, ok := f.nextSettle(); ok && d == 0 && f.settle(ctx) {
		changed = true
	}
	f.changed(changed)
	return err
}

// changed counts a change of the set.
func (f *File) changed(changed bool) {
	if changed {
		f.mu.Lock()
		f.version++
		f.mu.Unlock()
	}
}

// nextTick returns the first time after now on the grid of period from
// next (a zero next: now plus period).
func nextTick(next, now time.Time, period time.Duration) time.Time {
	if next.IsZero() {
		return now.Add(period)
	}
	return next.Add((now.Sub(next)/period + 1) * period)
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
// then whenever it changes, until ctx ends: a loop over SyncOnce, woken by
// the watch's events. Only one Run may be active at a time.
func (f *File) Run(ctx context.Context, updates chan<- Update) error {
	logger := klog.FromContext(ctx).WithValues("source", FileSource, "path", f.path)
	ctx = klog.NewContext(ctx, logger)
	if err := f.startWatch(); err != nil {
		return err
	}
	defer f.stopWatch()
	var sent uint64
	first := true
	return loop.Run(ctx, f.clock, func(ctx context.Context) (time.Duration, error) {
		if err := f.SyncOnce(ctx); err != nil {
			if first {
				logger.Error(err, "Cannot read the manifest path; will retry")
			} else {
				logger.Error(err, "Cannot read the manifest path; keeping the last set")
			}
		}
		f.mu.Lock()
		pods, version := f.pods, f.version
		f.mu.Unlock()
		if first || version != sent {
			if send(ctx, updates, Update{Op: OpSet, Source: FileSource, Pods: pods}) != nil {
				return loop.Never, nil
			}
			first, sent = false, version
		}
		return f.nextWait(), nil
	}, loop.Signal(f.wake))
}

// nextWait is how long Run waits for its next step when the watch delivers
// nothing: until the next periodic re-list or the first pending manifest
// is due.
func (f *File) nextWait() time.Duration {
	f.stepMu.Lock()
	d := max(f.nextRelist.Sub(f.clock.Now()), 0)
	f.stepMu.Unlock()
	if s, ok := f.nextSettle(); ok {
		d = min(d, s)
	}
	return d
}

// startWatch makes the steps keep a watch of the path, from the next one
// on (which re-lists at once).
func (f *File) startWatch() error {
	f.stepMu.Lock()
	defer f.stepMu.Unlock()
	f.wmu.Lock()
	defer f.wmu.Unlock()
	if f.watching {
		return errors.New("podsource: File.Run is already running")
	}
	f.watching = true
	f.nextRelist = time.Time{}
	f.names, f.werr, f.werrVal, f.wgone = nil, false, nil, false
	return nil
}

// stopWatch ends the watch once no step runs.
func (f *File) stopWatch() {
	f.stepMu.Lock()
	defer f.stepMu.Unlock()
	f.unwatch()
	f.wmu.Lock()
	f.watching = false
	f.names = nil
	f.wmu.Unlock()
}

func (f *File) hasWatch() bool {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	return f.w != nil
}

// unwatch closes the watch, if any, and waits for its forwarder.
func (f *File) unwatch() {
	f.wmu.Lock()
	w, done := f.w, f.wdone
	f.w, f.wdone = nil, nil
	f.wmu.Unlock()
	if w != nil {
		w.Close()
		<-done
	}
}

// rewatch replaces the watch with a new one (none when that is not possible
// yet).
func (f *File) rewatch(logger klog.Logger) {
	f.unwatch()
	w := f.watch(logger)
	if w == nil {
		return
	}
	done := make(chan struct{})
	f.wmu.Lock()
	f.w, f.wdone = w, done
	f.wmu.Unlock()
	go f.forward(w, done)
}

// forward hands w's events and errors to the steps and wakes Run, until w
// is closed.
func (f *File) forward(w *fsnotify.Watcher, done chan<- struct{}) {
	defer close(done)
	events, errs := w.Events, w.Errors
	for events != nil || errs != nil {
		var (
			name     string
			err      error
			failed   bool
			eventsOK = true
		)
		select {
		case ev, ok := <-events:
			if !ok {
				events, eventsOK = nil, false
				break
			}
			name = ev.Name
		case e, ok := <-errs:
			if !ok {
				errs = nil
			}
			err, failed = e, true
		}
		f.wmu.Lock()
		current := f.w == w
		if current {
			switch {
			case !eventsOK:
				f.wgone = true
			case failed:
				f.werr, f.werrVal = true, err
			default:
				if f.names == nil {
					f.names = map[string]bool{}
				}
				f.names[name] = true
			}
		}
		f.wmu.Unlock()
		if current {
			select {
			case f.wake <- struct{}{}:
			default:
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
func (f *File) handleEvents(ctx context.Context, names map[string]bool) (changed, rewatch bool) {
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
		f.setLocked(logger)
		return false, true
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
	f.setLocked(logger)
	return changed, rewatch
}

// relist reads the whole path. With settle (Run's re-lists), a manifest
// newly found invalid is reported only once it stayed so for SettleDelay, as
// after an event; SyncOnce reports at once.
func (f *File) relist(ctx context.Context, settle bool) (changed bool, err error) {
	logger := klog.FromContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()

	st, err := os.Stat(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f.pathErr = nil
		f.single = true
		changed = f.dropAllLocked()
		f.setLocked(logger)
		return changed, nil
	case err != nil:
		f.pathErr = fmt.Errorf("podsource: file %s: %w", f.path, err)
		f.setLocked(logger)
		return false, f.pathErr
	}
	seen := map[string]bool{}
	if st.IsDir() {
		f.single = false
		dirents, err := os.ReadDir(f.path)
		if err != nil {
			f.pathErr = fmt.Errorf("podsource: file %s: %w", f.path, err)
			f.setLocked(logger)
			return false, f.pathErr
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
	f.setLocked(logger)
	return changed, nil
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
// re-reading them first. It reports whether the set changed.
func (f *File) settle(ctx context.Context) (changed bool) {
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
	if changed {
		f.setLocked(logger)
	}
	return changed
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
