package nodeapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ReloadResync is how often a reloaded file (ServerOptions.CertFile and
// KeyFile, AuthOptions.ClientCAFile) is read even though its size,
// modification time and identity look unchanged, as kubelet's watch of
// them also re-reads them every minute.
const ReloadResync = time.Minute

// fileStamp is what a file looked like when last read: a change of its
// identity (a new file renamed over it, as a Secret volume's symlink swap
// does), size or modification time makes it read again.
type fileStamp struct{ info os.FileInfo }

func (s fileStamp) same(fi os.FileInfo) bool {
	return s.info != nil && os.SameFile(s.info, fi) && s.info.Size() == fi.Size() && s.info.ModTime().Equal(fi.ModTime())
}

// reloader holds what was last parsed from a set of files and reads them
// again at the next call of current once one of them changed on disk or
// ReloadResync passed since the last read. While nothing changes a call
// costs a stat per file. Content that does not parse (a pair of which
// one file is written and the other not yet, a bundle without
// certificates) is logged and the last good content kept.
type reloader[T any] struct {
	what  string // "serving certificate", "client CA bundle": for logs
	paths []string
	parse func(contents [][]byte) (T, error)
	clock clock.PassiveClock

	mu       sync.Mutex
	stamps   []fileStamp
	contents [][]byte  // last read
	read     time.Time // when
	cur      T         // last good
}

// newReloader reads and parses the files once: an error here is the
// caller's.
func newReloader[T any](what string, clk clock.PassiveClock, parse func([][]byte) (T, error), paths ...string) (*reloader[T], error) {
	r := &reloader[T]{what: what, paths: paths, parse: parse, clock: clk, stamps: make([]fileStamp, len(paths))}
	infos, contents, err := r.readAll()
	if err != nil {
		return nil, err
	}
	if r.cur, err = parse(contents); err != nil {
		return nil, err
	}
	r.remember(infos, contents)
	return r, nil
}

func (r *reloader[T]) stat() ([]os.FileInfo, error) {
	infos := make([]os.FileInfo, len(r.paths))
	for i, p := range r.paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		infos[i] = fi
	}
	return infos, nil
}

// readAll stats and reads each file (the stat first, so that a change
// during the read is seen at the next call).
func (r *reloader[T]) readAll() ([]os.FileInfo, [][]byte, error) {
	infos, err := r.stat()
	if err != nil {
		return nil, nil, err
	}
	contents := make([][]byte, len(r.paths))
	for i, p := range r.paths {
		if contents[i], err = os.ReadFile(p); err != nil {
			return nil, nil, err
		}
	}
	return infos, contents, nil
}

func (r *reloader[T]) remember(infos []os.FileInfo, contents [][]byte) {
	for i, fi := range infos {
		r.stamps[i] = fileStamp{fi}
	}
	r.contents, r.read = contents, r.clock.Now()
}

// current returns the files' content, read again first if one of them
// changed since the last read or ReloadResync passed.
func (r *reloader[T]) current(ctx context.Context) T {
	r.mu.Lock()
	defer r.mu.Unlock()
	logger := klog.FromContext(ctx)
	infos, err := r.stat()
	if err != nil {
		// Gone for a moment while being replaced, or for good: serve
		// what was read, and look again next time.
		logger.V(4).Info("Node API: cannot stat, keeping the last "+r.what, "err", err)
		return r.cur
	}
	changed := r.clock.Since(r.read) >= ReloadResync
	for i, fi := range infos {
		changed = changed || !r.stamps[i].same(fi)
	}
	if !changed {
		return r.cur
	}
	infos, contents, err := r.readAll()
	if err != nil {
		logger.V(4).Info("Node API: cannot read, keeping the last "+r.what, "err", err)
		return r.cur
	}
	same := true
	for i := range contents {
		same = same && bytes.Equal(contents[i], r.contents[i])
	}
	r.remember(infos, contents)
	if same {
		return r.cur
	}
	v, err := r.parse(contents)
	if err != nil {
		logger.Error(err, "Node API: keeping the last "+r.what, "files", r.paths)
		return r.cur
	}
	r.cur = v
	logger.Info("Node API: reloaded the "+r.what, "files", r.paths)
	return v
}

// parseKeyPair parses a serving certificate and its key, with the leaf.
func parseKeyPair(contents [][]byte) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(contents[0], contents[1])
	if err != nil {
		return nil, err
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, err
		}
	}
	return &cert, nil
}

// parseCABundle parses a PEM bundle of CA certificates into a pool.
func parseCABundle(contents [][]byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(contents[0]) {
		return nil, errors.New("no PEM certificates")
	}
	return pool, nil
}
