package logrotate

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/internal/optcheck"
	"github.com/nodekit/nodekit/runtime"
)

// Defaults and bounds of Options, the kubelet's.
const (
	DefaultMaxSize         = 10 << 20
	DefaultMaxFiles        = 5
	DefaultMonitorInterval = 10 * time.Second
	// TimestampFormat is appended to a rotated log's name: <log>.<timestamp>.
	TimestampFormat = "20060102-150405"
	compressSuffix  = ".gz"
	tmpSuffix       = ".tmp"
)

// Runtime is the sliver of runtime.Runtime the manager uses.
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	ReopenContainerLog(ctx context.Context, containerID string) error
}

// Options configure a Manager. The zero value of each field means its
// default.
type Options struct {
	// Runtime lists the running containers, tells their log paths and
	// reopens their logs. Required.
	Runtime Runtime
	// MaxSize (the kubelet's containerLogMaxSize) is the size at which a
	// log is rotated. Default 10 MiB; between 1 KiB and 1 TiB.
	MaxSize int64
	// MaxFiles (containerLogMaxFiles) bounds a container's log files, the
	// one it writes included. Default 5; between 2 and 1000.
	MaxFiles int
	// MonitorInterval (containerLogMonitorInterval) is how often Run looks.
	// Default 10s; between 3s and 1h.
	MonitorInterval time.Duration
	// Clock dates rotated files and drives Run. Default clock.RealClock{}.
	Clock clock.WithTicker
}

func (o *Options) defaults() error {
	if o.Runtime == nil {
		return optcheck.Required("logrotate: Options.Runtime")
	}
	if o.MaxSize == 0 {
		o.MaxSize = DefaultMaxSize
	}
	if err := optcheck.Range("logrotate: Options.MaxSize", o.MaxSize, 1<<10, 1<<40); err != nil {
		return err
	}
	if o.MaxFiles == 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if err := optcheck.Range("logrotate: Options.MaxFiles", o.MaxFiles, 2, 1000); err != nil {
		return err
	}
	if o.MonitorInterval == 0 {
		o.MonitorInterval = DefaultMonitorInterval
	}
	if err := optcheck.Range("logrotate: Options.MonitorInterval", o.MonitorInterval, 3*time.Second, time.Hour); err != nil {
		return err
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return nil
}

// Manager rotates the logs of running containers as the kubelet's
// container log manager does.
type Manager struct {
	o Options

	mu    sync.Mutex        // one look at a time
	paths map[string]string // log path by ID of the running containers of the last look
}

// New returns a Manager.
func New(o Options) (*Manager, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	return &Manager{o: o}, nil
}

// SyncOnce looks at every running container's log once and rotates those
// at MaxSize or more. A container that fails does not stop the others;
// the errors are returned together. A container's log path is asked of the
// runtime (ContainerStatus) at the first look that finds it running and
// kept while it runs.
func (m *Manager) SyncOnce(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	running := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	ctrs, err := m.o.Runtime.ListContainers(ctx, running)
	if err != nil {
		return fmt.Errorf("logrotate: listing containers: %w", err)
	}
	paths := make(map[string]string, len(ctrs))
	defer func() { m.paths = paths }()
	var errs []error
	for _, c := range ctrs {
		if ctx.Err() != nil {
			break
		}
		path, ok := m.paths[c.Id]
		if !ok {
			st, err := m.o.Runtime.ContainerStatus(ctx, c.Id, false)
			if runtime.IsNotFound(err) {
				continue // removed since the list
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("logrotate: container %s: %w", c.Id, err))
				continue
			}
			path = st.GetStatus().GetLogPath()
		}
		paths[c.Id] = path
		if path == "" {
			continue
		}
		info, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Rotated, and the runtime did not reopen it yet: ask again.
			if err := m.o.Runtime.ReopenContainerLog(ctx, c.Id); err != nil && !runtime.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("logrotate: container %s: reopening %s: %w", c.Id, path, err))
			}
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("logrotate: container %s: %w", c.Id, err))
			continue
		case info.Size() < m.o.MaxSize:
			continue
		}
		if err := m.rotate(ctx, c.Id, path); err != nil {
			errs = append(errs, fmt.Errorf("logrotate: container %s: %w", c.Id, err))
		}
	}
	return errors.Join(errs...)
}

// Run calls SyncOnce every MonitorInterval until ctx ends, logging errors,
// and returns nil.
func (m *Manager) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	return loop.Run(ctx, m.o.Clock, func(ctx context.Context) (time.Duration, error) {
		if err := m.SyncOnce(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Rotating container logs failed")
		}
		return m.o.MonitorInterval, nil
	})
}

// rotate makes room for one more rotated file, renames the log and has the
// runtime reopen it, then compresses the rotated files but the one just
// made. (kubelet compresses first, so a container writing fast fills its
// log a while longer: compressing a big file takes seconds.)
func (m *Manager) rotate(ctx context.Context, id, path string) error {
	rotated, err := m.cleanup(path)
	if err != nil {
		return err
	}
	// Keep MaxFiles-2 rotated files: with the one made now and the log the
	// runtime writes, MaxFiles in all.
	if excess := len(rotated) - (m.o.MaxFiles - 2); excess > 0 {
		for _, f := range rotated[:excess] {
			if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		rotated = rotated[excess:]
	}
	dst := path + "." + m.o.Clock.Now().Format(TimestampFormat)
	if _, err := os.Stat(dst); err == nil {
		// Rotated twice within a second: keep the earlier file.
		dst += "-" + fmt.Sprint(m.o.Clock.Now().Nanosecond())
	}
	if err := os.Rename(path, dst); err != nil {
		return err
	}
	switch err := m.o.Runtime.ReopenContainerLog(ctx, id); {
	case runtime.IsNotFound(err):
		// The container is gone: nothing writes the log any more.
	case err != nil:
		// The runtime still writes to the renamed file: give it its name back.
		if rerr := os.Rename(dst, path); rerr != nil {
			return errors.Join(fmt.Errorf("reopening %s: %w", path, err), rerr)
		}
		return fmt.Errorf("reopening %s: %w", path, err)
	}
	for _, f := range rotated {
		if !strings.HasSuffix(f, compressSuffix) {
			if err := compress(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// cleanup removes what an interrupted rotation left (temporary files, and
// uncompressed files whose compressed copy is complete) and returns the
// rotated files, oldest first.
func (m *Manager) cleanup(path string) ([]string, error) {
	matches, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, f := range matches {
		have[f] = true
	}
	var rotated []string
	for _, f := range matches {
		switch {
		case strings.HasSuffix(f, tmpSuffix):
			_ = os.Remove(f)
		case !strings.HasSuffix(f, compressSuffix) && have[f+compressSuffix]:
			_ = os.Remove(f)
		default:
			rotated = append(rotated, f)
		}
	}
	// The names end in a timestamp: lexical order is age order.
	sort.Strings(rotated)
	return rotated, nil
}

// globEscape quotes the glob metacharacters of a literal path.
func globEscape(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// compress writes f.gz through a temporary file and removes f.
func compress(f string) error {
	in, err := os.Open(f)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := f + compressSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	// The fastest level: a log is text, and the agent's CPU is the node's.
	zw, _ := gzip.NewWriterLevel(out, gzip.BestSpeed)
	_, err = io.Copy(zw, in)
	err = errors.Join(err, zw.Close(), out.Close())
	if err == nil {
		err = os.Rename(tmp, f+compressSuffix)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("compressing %s: %w", f, err)
	}
	return os.Remove(f)
}
