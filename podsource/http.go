package podsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/loop"
	"github.com/nodekit/nodekit/internal/optcheck"
)

// HTTPOptions configures an HTTP source.
type HTTPOptions struct {
	// URL serves one Pod, a PodList or a v1 List of Pods, in YAML or JSON.
	// Required; http or https.
	URL string
	// NodeName is this node's name. Required.
	NodeName string
	// Header is sent with every request. Default none.
	Header http.Header
	// Client makes the requests. Default a new http.Client with no timeout of
	// its own (Timeout applies).
	Client *http.Client
	// Timeout bounds one fetch, body included, measured on Clock. Default 10s
	// (kubelet's); 10ms to 5m.
	Timeout time.Duration
	// Period is how often the URL is fetched. Default 20s; 1s to 24h.
	Period time.Duration
	// Clock drives the fetch ticker and the timeout. Default the real clock.
	Clock clock.WithTicker
	// Recorder, if set, receives a Warning event (reason InvalidManifest) on
	// the Node when the URL serves something unusable. Default none.
	Recorder record.EventRecorder
}

// HTTP is the static pod source for a manifest URL.
//
// Run fetches the URL at once and then every Period, and sends the full set
// when it changed. A 200 answer is decoded with DecodeManifestList; an empty
// 200 body is an empty set (as kubelet). A body identical to the last one is
// not decoded again.
//
// Unlike kubelet in one respect, and as kubelet in the rest: a fetch that
// fails, times out, answers other than 200, or serves something that does
// not decode or validate sends nothing, so the merger keeps the last set
// served; the error is logged (the first three times at info level, then at
// V(4), as kubelet) and, with a Recorder, recorded on the Node. Until a
// first good answer nothing is sent at all, so the merger does not count
// the source as seen.
type HTTP struct {
	url      string
	nodeName string
	header   http.Header
	client   *http.Client
	timeout  time.Duration
	period   time.Duration
	clock    clock.WithTicker
	recorder record.EventRecorder

	fetchMu sync.Mutex // serialises fetches; guards the fields below up to mu
	data    []byte     // the last body decoded, good or bad
	decoded bool       // data holds a decoded body
	dataErr error      // why data was not usable
	pods    []*v1.Pod  // the last good set
	served  bool       // a good set was served

	mu       sync.Mutex
	lastErr  error
	failures int
	latest   []*v1.Pod // the last good set, published for Pods
	haveSet  bool      // latest holds a set
}

// NewHTTP checks the options and returns an HTTP source.
func NewHTTP(opts HTTPOptions) (*HTTP, error) {
	if opts.URL == "" {
		return nil, optcheck.Required("podsource: HTTPOptions.URL")
	}
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("podsource: HTTPOptions.URL %q: want an http or https URL", opts.URL)
	}
	if err := checkNodeName("HTTPOptions", &opts.NodeName); err != nil {
		return nil, err
	}
	if err := checkDuration("HTTPOptions.Timeout", &opts.Timeout, DefaultHTTPTimeout, MinHTTPTimeout, MaxHTTPTimeout); err != nil {
		return nil, err
	}
	if err := checkDuration("HTTPOptions.Period", &opts.Period, DefaultPeriod, MinPeriod, MaxPeriod); err != nil {
		return nil, err
	}
	if opts.Client == nil {
		opts.Client = &http.Client{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &HTTP{
		url:      opts.URL,
		nodeName: opts.NodeName,
		header:   opts.Header.Clone(),
		client:   opts.Client,
		timeout:  opts.Timeout,
		period:   opts.Period,
		clock:    opts.Clock,
		recorder: opts.Recorder,
	}, nil
}

// Name returns HTTPSource.
func (h *HTTP) Name() string { return HTTPSource }

// LastError is the error of the last fetch, nil if it succeeded.
func (h *HTTP) LastError() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastErr
}

// SyncOnce fetches the URL once and returns the fetch's error (also kept
// for LastError). After a good answer Pods returns the set it served; after
// a failure Pods keeps the last good set.
func (h *HTTP) SyncOnce(ctx context.Context) error {
	_, _, err := h.sync(ctx)
	return err
}

// Pods returns the last good set the URL served, and false until it served
// one. The pods are shared: do not modify them.
func (h *HTTP) Pods() ([]*v1.Pod, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.haveSet {
		return nil, false
	}
	return append([]*v1.Pod{}, h.latest...), true
}

// sync is SyncOnce for Run: it also returns the set to send and whether it
// differs from the last good one (always true for the first good answer).
func (h *HTTP) sync(ctx context.Context) (pods []*v1.Pod, changed bool, err error) {
	h.fetchMu.Lock()
	defer h.fetchMu.Unlock()
	pods, changed, err = h.fetchLocked(ctx)
	h.mu.Lock()
	h.lastErr = err
	h.latest, h.haveSet = h.pods, h.served
	h.mu.Unlock()
	if err != nil {
		return h.pods, false, err
	}
	return pods, changed, nil
}

func (h *HTTP) fetchLocked(ctx context.Context) ([]*v1.Pod, bool, error) {
	data, err := h.get(ctx)
	if err != nil {
		return nil, false, err
	}
	if h.decoded && bytes.Equal(data, h.data) {
		if h.dataErr != nil {
			return nil, false, h.dataErr
		}
		return h.pods, false, nil
	}
	h.data, h.decoded, h.dataErr = data, true, nil
	origin := Origin{Source: HTTPSource, Location: h.url, NodeName: h.nodeName}
	var pods []*v1.Pod
	if len(bytes.TrimSpace(data)) > 0 {
		pods, err = DecodeManifestList(data, origin)
		if err != nil {
			h.dataErr = err
			return nil, false, err
		}
	} else {
		pods = []*v1.Pod{}
	}
	changed := !h.served || !sameSet(h.pods, pods)
	h.pods, h.served = pods, true
	return pods, changed, nil
}

func sameSet(a, b []*v1.Pod) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].UID != b[i].UID || !equalPods(a[i], b[i]) {
			return false
		}
	}
	return true
}

// get fetches the body, bounded by the timeout on the injected clock.
func (h *HTTP) get(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := h.clock.NewTimer(h.timeout)
	defer timer.Stop()
	var (
		timedOut bool
		toMu     sync.Mutex
		done     = make(chan struct{})
	)
	defer close(done)
	go func() {
		select {
		case <-timer.C():
			toMu.Lock()
			timedOut = true
			toMu.Unlock()
			cancel()
		case <-done:
		}
	}()
	wrap := func(err error) error {
		toMu.Lock()
		defer toMu.Unlock()
		if timedOut {
			return fmt.Errorf("podsource: http %s: no answer within %v: %w", h.url, h.timeout, context.DeadlineExceeded)
		}
		return fmt.Errorf("podsource: http %s: %w", h.url, err)
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.url, nil)
	if err != nil {
		return nil, fmt.Errorf("podsource: http %s: %w", h.url, err)
	}
	for k, vs := range h.header {
		req.Header[k] = append([]string(nil), vs...)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, wrap(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxManifestBytes+1))
	if err != nil {
		return nil, wrap(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("podsource: http %s: %s", h.url, resp.Status)
	}
	if len(data) > MaxManifestBytes {
		return nil, fmt.Errorf("podsource: http %s: body larger than %d bytes", h.url, MaxManifestBytes)
	}
	return data, nil
}

// Run fetches at once and every Period, sending the set whenever a good
// answer changes it, until ctx ends.
func (h *HTTP) Run(ctx context.Context, updates chan<- Update) error {
	logger := klog.FromContext(ctx).WithValues("source", HTTPSource, "url", h.url)
	return loop.Run(ctx, h.clock, func(ctx context.Context) (time.Duration, error) {
		pods, changed, err := h.sync(ctx)
		if ctx.Err() != nil {
			return loop.Never, nil
		}
		if err != nil {
			h.reportFailure(logger, err)
		} else {
			h.reportSuccess(logger)
		}
		if err == nil && changed {
			if send(ctx, updates, Update{Op: OpSet, Source: HTTPSource, Pods: pods}) != nil {
				return loop.Never, nil
			}
		}
		return h.period, nil
	})
}

func (h *HTTP) reportFailure(logger klog.Logger, err error) {
	h.mu.Lock()
	n := h.failures
	h.failures++
	h.mu.Unlock()
	switch {
	case n < 3:
		logger.Info("Failed to read pods from the manifest URL; keeping the last set", "err", err)
	case n == 3:
		logger.Info("Failed to read pods from the manifest URL; keeping the last set. Further failures are logged at V(4)", "err", err)
	default:
		logger.V(4).Info("Failed to read pods from the manifest URL; keeping the last set", "err", err)
	}
	if h.recorder != nil && errors.Is(err, ErrInvalidManifest) {
		h.recorder.Eventf(nodeRef(h.nodeName), v1.EventTypeWarning, ReasonInvalidManifest, "%v", err)
	}
}

func (h *HTTP) reportSuccess(logger klog.Logger) {
	h.mu.Lock()
	n := h.failures
	h.failures = 0
	h.mu.Unlock()
	if n > 0 {
		logger.Info("Read pods from the manifest URL again")
	}
}
