package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	goruntime "runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"
)

// userAgent is what the agent calls itself in API requests.
const userAgent = "nodekit-agent/" + nodestatus.DefaultKubeletVersion

// component is one long-running part of the agent. Run returns when ctx
// ends (its error is then ignored) or when the part fails, which stops the
// others. The node half is the runtime connection, the heartbeat and the
// local HTTP server; the pod half (podHalf: pod sources, mirror pods, pod
// sync, probes, status writer) is one more component of the same list.
type component struct {
	name string
	run  func(ctx context.Context) error
}

// agent is a node agent built from nodekit's packages.
type agent struct {
	name      string
	client    *nodeClient // nil: standalone (no --kubeconfig)
	runtime   *runtimeConn
	setters   nodestatus.Setters
	heartbeat *heartbeat.Heartbeat // nil: standalone
	registry  *prometheus.Registry
	listener  net.Listener // nil: no local server
	server    *http.Server
	nodeAPI   net.Listener // kubelet's port; nil: --port=0

	pods *podHalf // nil: no pod source configured

	components []component
}

// newAgent builds the agent from cfg. It makes no request to the API server
// or the runtime; it does bind the local listener, so that a busy port is an
// error at start.
func newAgent(cfg *config, clk clock.Clock) (*agent, error) {
	name, err := cfg.nodeName()
	if err != nil {
		return nil, err
	}
	a := &agent{name: name, registry: prometheus.NewRegistry()}
	a.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)

	a.runtime = newRuntimeConn(cfg.runtimeEndpoint, clk)
	// With an API server there is always a pod half (the API source), whose
	// relists give the node its runtime status.
	rs := &runtimeStatus{conn: a.runtime}
	pr := &pressure{} // the pod half's eviction manager, for the node's pressure conditions
	a.components = []component{{name: "runtime", run: a.runtime.Run}}

	// The node half: only with an API server.
	if cfg.kubeconfig != "" {
		restCfg, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", cfg.kubeconfig, err)
		}
		counter, err := newAPICounter(a.registry)
		if err != nil {
			return nil, err
		}
		restCfg.QPS, restCfg.Burst = float32(cfg.kubeAPIQPS), cfg.kubeAPIBurst
		if a.client, err = newClient(restCfg, counter); err != nil {
			return nil, err
		}
		if a.setters, err = newSetters(cfg, name, a.runtime, rs); err != nil {
			return nil, err
		}
		if a.setters, err = pr.setters(a.setters); err != nil {
			return nil, err
		}
		hbOpts := heartbeat.Options{
			Nodes:                     a.client.Nodes(),
			Leases:                    a.client.nodeLeases(),
			NodeName:                  name,
			Node:                      nodeTemplate(cfg, name),
			StatusSetter:              a.setters,
			Strategy:                  heartbeat.LeaseStrategy(),
			NodeStatusUpdateFrequency: cfg.statusUpdateFrequency,
			NodeStatusReportFrequency: cfg.statusReportFrequency,
			DisableRegistration:       !cfg.registerNode,
			Clock:                     clk,
			Registerer:                a.registry,
			LeaseOptions:              leaseOptions(cfg.leaseDuration),
			OnRepeatedFailure:         a.client.closeConnections,
		}
		if a.heartbeat, err = heartbeat.New(hbOpts); err != nil {
			return nil, err
		}
		a.components = append(a.components, component{name: "heartbeat", run: a.heartbeat.Run})
	}

	// The pod half.
	tclk, ok := clk.(clock.WithTicker)
	if !ok {
		tclk = clock.RealClock{}
	}
	if a.pods, err = newPodHalf(cfg, name, tclk, a.runtime, rs, a.client, a.heartbeat, a.registry); err != nil {
		return nil, err
	}
	if a.pods != nil {
		if a.setters != nil {
			a.pods.pressure = pr
		}
		a.components = append(a.components, component{name: "pods", run: a.pods.Run})
	}

	if cfg.port != 0 {
		if err = a.newNodeAPI(cfg, tclk); err != nil {
			return nil, err
		}
	}
	if cfg.listen != "" {
		if a.listener, err = net.Listen("tcp", cfg.listen); err != nil {
			return nil, fmt.Errorf("--listen: %w", err)
		}
		a.server = &http.Server{Handler: a.handler(), ReadHeaderTimeout: 5 * time.Second}
		a.components = append(a.components, component{name: "http", run: a.serve})
	}
	return a, nil
}

// leaseOptions returns the lease options for duration: kubelet's timing (a
// renewal every quarter of the duration, the lease package's default).
func leaseOptions(duration time.Duration) lease.Options {
	return lease.Options{LeaseDuration: duration}
}

// newClient returns the agent's one API client: protobuf on the wire (smaller
// writes than JSON), every request counted, rate-limited as cfg says
// (--kube-api-qps and --kube-api-burst; client-go's own default, 5 per
// second, would space a pod's status writes and events 200 ms apart).
func newClient(cfg *rest.Config, counter *apiCounter) (*nodeClient, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = userAgent
	cfg.Wrap(counter.wrap)
	return newNodeClient(cfg)
}

// nodeTemplate is the Node the agent registers: kubelet's default labels,
// the user's labels, the attach/detach annotation kubelet sets, and the
// taints and provider ID asked for.
func nodeTemplate(cfg *config, name string) *corev1.Node {
	l := map[string]string{
		corev1.LabelHostname:      name,
		corev1.LabelOSStable:      goruntime.GOOS,
		corev1.LabelArchStable:    goruntime.GOARCH,
		"beta.kubernetes.io/os":   goruntime.GOOS,
		"beta.kubernetes.io/arch": goruntime.GOARCH,
	}
	for k, v := range cfg.nodeLabels {
		l[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      l,
			Annotations: map[string]string{heartbeat.ControllerManagedAttachAnnotation: "true"},
		},
		Spec: corev1.NodeSpec{Taints: cfg.registerWithTaints, ProviderID: cfg.providerID},
	}
}

// newSetters returns kubelet's default setters with the custom DiskUsage
// setter placed before Ready.
// status, when not nil, is the runtime's status as the pod half observes it.
func newSetters(cfg *config, name string, rt nodestatus.RuntimeInfo, status nodestatus.RuntimeStatusSource) (nodestatus.Setters, error) {
	setters, err := nodestatus.DefaultSetters(nodestatus.Options{
		Hostname:       name,
		NodeIPs:        cfg.nodeIPs,
		Runtime:        rt,
		RuntimeStatus:  status,
		KubeletPort:    int32(cfg.port), // 0 (not served): nodestatus's default
		MaxPods:        cfg.maxPods,
		PodsPerCore:    cfg.podsPerCore,
		SystemReserved: cfg.systemReserved,
		KubeReserved:   cfg.kubeReserved,

		RuntimeDownAfter: cfg.runtimeDownAfter,
	})
	if err != nil {
		return nil, err
	}
	if cfg.diskUsagePath == "" {
		return setters, nil
	}
	du, err := nodestatus.DiskUsage(nodestatus.DiskUsageOptions{
		Path:             cfg.diskUsagePath,
		ThresholdPercent: cfg.diskUsageThreshold,
		ResourceName:     corev1.ResourceName(cfg.diskUsageResource),
	})
	if err != nil {
		return nil, fmt.Errorf("--disk-usage-*: %w", err)
	}
	return setters.InsertBefore(nodestatus.SetterReady, nodestatus.Named{Name: "DiskUsage", StatusSetter: du})
}

// handler serves /healthz and /metrics (the agent's own registry, not the
// process-wide default one).
func (a *agent) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	mux.Handle("/metrics", a.metricsHandler())
	return mux
}

func (a *agent) serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- a.server.Serve(a.listener) }()
	klog.FromContext(ctx).Info("Serving /healthz and /metrics", "address", a.listener.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := a.server.Shutdown(sctx); err != nil {
		_ = a.server.Close()
	}
	<-errc
	return nil
}

// Run runs every component until ctx ends or one fails; it then stops the
// others and waits for them. The node lease is not deleted: like kubelet's,
// it is left to expire.
func (a *agent) Run(ctx context.Context) error {
	return runComponents(ctx, a.components)
}

// runComponents runs comps concurrently until ctx ends or one of them returns
// while ctx is still live; then it cancels the rest, waits for all, and
// returns the failures joined (nil after a plain stop).
func runComponents(ctx context.Context, comps []component) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, c := range comps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.run(ctx)
			if ctx.Err() != nil {
				return // stopping: whatever it returned is the stop
			}
			if err == nil {
				err = errors.New("stopped unexpectedly")
			}
			mu.Lock()
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
			mu.Unlock()
			cancel()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// metricsHandler serves the agent's registry in Prometheus' format, on
// --listen and on the node API's /metrics.
func (a *agent) metricsHandler() http.Handler {
	return promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{Registry: a.registry})
}
