// Command fleet simulates many nodes against a real cluster: each node
// registers its Node, renews its Lease and posts its status with nodekit's
// heartbeat and lease code, all served by one client and a bounded pool of
// workers (see package heartbeat/heartbeattest).
//
//	go run ./examples/fleet --kubeconfig /tmp/fleet-cp/admin.kubeconfig --nodes 1000
//	go run ./examples/fleet --kubeconfig /tmp/fleet-cp/admin.kubeconfig --cleanup
//
// While it runs it prints, every --print-every, how many leases are fresh
// (renewed within the lease duration), the age of the oldest renewTime,
// requests per second and errors, and its own CPU and memory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	kubeclient "github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/heartbeat"
	"github.com/nodekit/nodekit/heartbeat/fleet"
	"github.com/nodekit/nodekit/heartbeat/fleet/fleetapi"
	"github.com/nodekit/nodekit/internal/memlimit"
	"github.com/nodekit/nodekit/lease"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/podsync"
	"github.com/nodekit/nodekit/podsync/nodeapi"
	"github.com/nodekit/nodekit/podsync/podsynctest"
	"github.com/nodekit/nodekit/podsync/podsynctest/simapi"
	"github.com/nodekit/nodekit/podsync/status"
	"github.com/nodekit/nodekit/probe"
)

// prefixLabel holds the name prefix of the fleet that registered a node, so
// that --cleanup finds its nodes.
const prefixLabel = "fleet.nodekit.io/prefix"

// podWorkers is --workers' default with --pods: a node's pod step holds its
// worker while the node's status writes are in flight, so on a busy API
// server 16 workers bound the pods made Ready to 16 a round trip (10,000
// pods on 1,000 nodes: create → Ready p50 11.5 s with 16, 5.5 s with 128).
const podWorkers = 128

type config struct {
	kubeconfig     string
	nodes          int
	qps            float64
	burst          int
	prefix         string
	cleanup        bool
	leaseDuration  time.Duration
	renewInterval  time.Duration
	statusFreq     time.Duration
	reportFreq     time.Duration
	workers        int
	granularity    time.Duration
	duration       time.Duration
	printEvery     time.Duration
	verifyEvery    time.Duration
	cpu, memory    string
	maxPods        int
	podRules       string
	shard          string
	podWriteQPS    float64
	pendingDelay   time.Duration
	nodeAPIPort    int
	clientCAFile   string
	protobuf       bool
	requestTimeout time.Duration
	cpuProfile     string
	debugAddr      string
	http1          bool
	leanLeases     bool
	procs          int
	memoryLimit    string
}

func main() {
	var c config
	flag.StringVar(&c.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster (an identity that may create nodes and leases)")
	flag.IntVar(&c.nodes, "nodes", 100, "number of simulated nodes")
	flag.Float64Var(&c.qps, "qps", 0, "client-side requests per second for the whole fleet (0: no client-side limit; --workers bounds the requests in flight)")
	flag.IntVar(&c.burst, "burst", 0, "client-side burst for the whole fleet (0: twice --qps)")
	flag.Float64Var(&c.podWriteQPS, "pod-write-qps", 0, "budget of the pods' status writes and deletes, shared by every node (0: the client's --qps only)")
	flag.DurationVar(&c.pendingDelay, "pending-status-delay", 500*time.Millisecond, "how long a pod status that stays Pending (ContainerCreating) may wait to be written, so a pod that starts within it costs one write, as the agent's flag of the same name (0: write every change at once, as kubelet; at most 10s)")
	flag.IntVar(&c.nodeAPIPort, "node-api-port", 0, "serve every node's kubelet API (stats, metrics, logs of its simulated pods; needs --pods) on this port of all addresses, each node at its own address 127.64.0.1 and on (its InternalIP); 0: none")
	flag.StringVar(&c.clientCAFile, "client-ca-file", "", "with --node-api-port: client certificates signed by this CA are authenticated, as kubelet's --client-ca-file (bearer tokens are reviewed with TokenReviews, requests authorized with SubjectAccessReviews)")
	flag.StringVar(&c.shard, "shard", "", "i/n: run only the nodes whose name hashes to share i of n (n processes with the same --nodes and --prefix share the cluster without overlap)")
	flag.StringVar(&c.prefix, "prefix", "fleet-", "node name prefix: nodes are <prefix>0 ... <prefix>N-1")
	flag.BoolVar(&c.cleanup, "cleanup", false, "delete the nodes and leases with this prefix, and exit")
	flag.DurationVar(&c.leaseDuration, "lease-duration", 40*time.Second, "lease duration written to each lease")
	flag.DurationVar(&c.renewInterval, "renew-interval", 0, "lease renew interval (0: a quarter of the lease duration, as kubelet)")
	flag.DurationVar(&c.statusFreq, "status-frequency", 10*time.Second, "how often each node computes its status (posted only on change or every --report-frequency)")
	flag.DurationVar(&c.reportFreq, "report-frequency", 5*time.Minute, "how often an unchanged status is posted")
	flag.IntVar(&c.workers, "workers", 0, "steps running at once (in-flight requests at most); 0: 16, or 128 with --pods (a node's pod step waits for its status writes)")
	flag.DurationVar(&c.granularity, "granularity", time.Second, "tick of the schedule: node slots are rounded up to a multiple of it, and the nodes sharing a tick are served as a batch")
	flag.DurationVar(&c.duration, "duration", 0, "stop after this long (0: run until interrupted)")
	flag.DurationVar(&c.printEvery, "print-every", 5*time.Second, "progress line period")
	flag.DurationVar(&c.verifyEvery, "verify-every", 30*time.Second, "list the leases from the API server this often to check their renewTimes (0: never)")
	flag.StringVar(&c.cpu, "cpu", "32", "cpu capacity of each node")
	flag.StringVar(&c.memory, "memory", "256Gi", "memory capacity of each node")
	flag.IntVar(&c.maxPods, "max-pods", 110, "pods capacity of each node")
	flag.StringVar(&c.podRules, "pods", "", `run the API pods bound to the fleet's nodes: "default" (kwok's default stages: Running and Ready at once, deleted when asked) or a rules file (podsync/podsynctest.Rules); "" runs none`)
	flag.BoolVar(&c.protobuf, "protobuf", true, "talk protobuf to the API server where it can")
	flag.DurationVar(&c.requestTimeout, "request-timeout", 0, "per-request timeout (0: the heartbeat's default, min(status frequency, lease duration))")
	flag.BoolVar(&c.http1, "http1", false, "use HTTP/1.1 connections instead of one HTTP/2 connection")
	flag.BoolVar(&c.leanLeases, "lean-leases", true, "send lease reads and writes through fleet.LeanLeases (protobuf, no REST request builder) instead of the REST client")
	flag.IntVar(&c.procs, "gomaxprocs", 1, "Go's GOMAXPROCS for the simulator (0: Go's default, one per core); one keeps its request hand-offs on one thread, which costs about a sixth less CPU than two")
	flag.StringVar(&c.memoryLimit, "memory-limit", "0", "soft memory limit of the Go runtime (debug.SetMemoryLimit) unless GOMEMLIMIT is set, as the agent's flag of the same name; 0: none (GOGC alone)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	flag.StringVar(&c.debugAddr, "debug-addr", "", "serve net/http/pprof on this address (for example localhost:6060)")
	klog.InitFlags(nil)
	flag.Parse()
	if c.workers == 0 {
		c.workers = fleet.DefaultWorkers
		if c.podRules != "" {
			c.workers = podWorkers
		}
	}
	if c.procs > 0 {
		runtime.GOMAXPROCS(c.procs)
	}
	limit, err := memlimit.Parse(c.memoryLimit)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet: --memory-limit:", err)
		os.Exit(2)
	}
	memlimit.Apply(limit)
	if c.debugAddr != "" {
		go func() { fmt.Fprintln(os.Stderr, "fleet: debug server:", http.ListenAndServe(c.debugAddr, nil)) }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fleet:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "fleet:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

// counter counts requests at the transport: all of them, the errors
// (transport errors other than cancellation at the end, 5xx, 429 and 4xx
// other than the expected ones), and
// the expected refusals (404 of a lease not created yet, 409 conflicts and
// already-exists, which the renewer and the heartbeat handle).
type counter struct {
	rt                        http.RoundTripper
	requests, fails, refusals atomic.Uint64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	resp, err := c.rt.RoundTrip(r)
	switch {
	case err != nil && r.Context().Err() != nil:
		// Cancelled by the fleet stopping, not failed.
	case err != nil:
		c.fails.Add(1)
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusConflict:
		c.refusals.Add(1)
	case resp.StatusCode >= 400:
		c.fails.Add(1)
	}
	return resp, err
}

func run(ctx context.Context, c config) error {
	if c.kubeconfig == "" {
		return errors.New("--kubeconfig is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return err
	}
	if c.burst == 0 {
		c.burst = int(2 * c.qps)
	}
	cfg.QPS, cfg.Burst = float32(c.qps), c.burst
	if c.qps == 0 {
		cfg.QPS = -1 // no client-side rate limiter
	}
	cfg.UserAgent = "nodekit-fleet"
	if c.http1 {
		cfg.NextProtos = []string{"http/1.1"}
	}
	if c.protobuf {
		cfg.ContentType = kubeclient.ContentTypeProtobuf
		cfg.AcceptContentTypes = kubeclient.ContentTypeProtobuf + "," + kubeclient.ContentTypeJSON
	} else {
		cfg.ContentType = kubeclient.ContentTypeJSON
	}
	cnt := &counter{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { cnt.rt = rt; return cnt })
	client, err := kubeclient.NewClient(cfg)
	if err != nil {
		return err
	}
	if c.cleanup {
		return cleanup(ctx, client, c)
	}
	var leases fleet.LeaseClient = client.Leases(corev1.NamespaceNodeLease)
	if c.leanLeases {
		if !c.protobuf {
			return errors.New("--lean-leases needs --protobuf")
		}
		if leases, err = fleet.LeanLeases(leases, cfg, corev1.NamespaceNodeLease); err != nil {
			return err
		}
	}
	// The progress lines read through a client of their own, so that they
	// do not queue behind the fleet's requests in its rate limiter.
	mcfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return err
	}
	mcfg.QPS, mcfg.Burst = 5, 10
	mcfg.UserAgent = "nodekit-fleet-monitor"
	mcfg.ContentType = cfg.ContentType
	mcfg.AcceptContentTypes = cfg.AcceptContentTypes
	monitor, err := kubeclient.NewClient(mcfg)
	if err != nil {
		return err
	}
	var pods *kubeclient.FleetPods
	var api *fleetapi.Server
	var nodeAPI net.Listener
	if c.nodeAPIPort != 0 {
		if c.podRules == "" {
			return errors.New("--node-api-port needs --pods")
		}
		if nodeAPI, err = net.Listen("tcp", fmt.Sprintf(":%d", c.nodeAPIPort)); err != nil {
			return fmt.Errorf("--node-api-port: %w", err)
		}
		defer nodeAPI.Close()
	}
	if c.podRules != "" {
		var reviews kubernetes.Interface
		if nodeAPI != nil {
			rcfg := rest.CopyConfig(mcfg)
			rcfg.QPS, rcfg.Burst, rcfg.UserAgent = 50, 100, "nodekit-fleet-node-api"
			if reviews, err = kubernetes.NewForConfig(rcfg); err != nil {
				return err
			}
		}
		if pods, api, err = fleetPods(client, c, reviews); err != nil {
			return err
		}
	}
	return simulate(ctx, client.Nodes(), leases, pods, api, nodeAPI, monitor, cnt, c)
}

// fleetPods runs the API pods bound to the fleet's nodes on simulated
// containers, as rules (a file, or kwok's default stages) say, through the
// fleet's client: one watch of the bound pods and one write budget.
//
// With reviews, every node serves its node API (--node-api-port): the
// simulated usage and logs of its pods, authenticated and authorized
// through reviews.
func fleetPods(client *kubeclient.Client, c config, reviews kubernetes.Interface) (*kubeclient.FleetPods, *fleetapi.Server, error) {
	var rules *podsynctest.Rules // nil: kwok's default stages
	if c.podRules != "default" {
		var err error
		if rules, err = podsynctest.LoadRules(c.podRules); err != nil {
			return nil, nil, fmt.Errorf("--pods: %w", err)
		}
	}
	// Each node's prober is made with its backend, whose containers'
	// start times it reads; one prober hands each probe to its node's.
	var probers sync.Map // node name -> probe.Prober
	prober := probe.ProberFunc(func(ctx context.Context, spec *corev1.Probe, t probe.Target) probe.Outcome {
		if t.Pod != nil {
			if p, ok := probers.Load(t.Pod.Spec.NodeName); ok {
				return p.(probe.Prober).Probe(ctx, spec, t)
			}
		}
		return probe.Outcome{Result: probe.Unknown, Message: "no simulated node for the pod"}
	})
	var sims sync.Map // node name -> *podsynctest.Backend
	o := kubeclient.FleetPodsOptions{
		API:      client.API(),
		Prober:   prober,
		WriteQPS: float32(c.podWriteQPS),
		Status:   status.Options{PendingDelay: c.pendingDelay},
		Backend: func(n fleet.PodNode, podIP func(*corev1.Pod) string) podsync.BackendFunc {
			return func(parts podsync.BackendParts) (podsync.Backend, error) {
				sim := podsynctest.New(podsynctest.Options{Stages: rules.Stages, PodIP: podIP, Probes: parts.Probes})
				p, err := rules.Prober(podsynctest.ProberOptions{StartedAt: sim.StartedAt})
				if err != nil {
					return podsync.Backend{}, err
				}
				probers.Store(n.Name, p)
				sims.Store(n.Name, sim)
				return podsync.Backend{Syncer: sim}, nil
			}
		},
	}
	var api *fleetapi.Server
	if reviews != nil {
		var err error
		api, err = fleetapi.New(fleetapi.Options{
			Port: c.nodeAPIPort,
			Auth: nodeapi.AuthOptions{ClientCAFile: c.clientCAFile,
				TokenReviews: reviews.AuthenticationV1().TokenReviews(), SubjectAccessReviews: reviews.AuthorizationV1().SubjectAccessReviews()},
			Node: func(n fleet.PodNode, pods func(context.Context) []*corev1.Pod) (nodeapi.Options, error) {
				sim, ok := sims.Load(n.Name)
				if !ok {
					return nodeapi.Options{}, fmt.Errorf("node %s has no simulated backend", n.Name)
				}
				node, err := simapi.New(simapi.Options{NodeName: n.Name, Backend: sim.(*podsynctest.Backend),
					Pods: pods, Usage: rules.Usage, CPUTime: rules.CPUTime})
				if err != nil {
					return nodeapi.Options{}, err
				}
				return nodeapi.Options{Stats: node, Logs: node.Logs}, nil
			},
		})
		if err != nil {
			return nil, nil, err
		}
		o.OnNode = func(n fleet.PodNode, half *kubeclient.PodHalf) error { return api.Add(n, half.Pods) }
	}
	pods, err := kubeclient.NewFleetPods(o)
	return pods, api, err
}

func simulate(ctx context.Context, nodes fleet.NodeClient, leases fleet.LeaseClient, pods *kubeclient.FleetPods, api *fleetapi.Server, nodeAPI net.Listener, monitor *kubeclient.Client, cnt *counter, c config) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(c.cpu),
		corev1.ResourceMemory: resource.MustParse(c.memory),
		corev1.ResourcePods:   *resource.NewQuantity(int64(c.maxPods), resource.DecimalSI),
	}
	var shard fleet.Shard
	if c.shard != "" {
		var err error
		if shard, err = fleet.ParseShard(c.shard); err != nil {
			return fmt.Errorf("--shard: %w", err)
		}
	}
	prefixValue := strings.TrimSuffix(c.prefix, "-")
	started := time.Now()
	fl, err := fleet.New(fleet.Options{
		Nodes:                 nodes,
		Leases:                leases,
		Count:                 c.nodes,
		NamePrefix:            c.prefix,
		LeaseDuration:         c.leaseDuration,
		RenewInterval:         c.renewInterval,
		StatusUpdateFrequency: c.statusFreq,
		StatusReportFrequency: c.reportFreq,
		Workers:               c.workers,
		Granularity:           c.granularity,
		Template: func(i int, name string) *corev1.Node {
			n := fleet.DefaultTemplate(i, name)
			n.Labels[prefixLabel] = prefixValue
			n.Status.Capacity = capacity
			return n
		},
		Heartbeat: func(_ int, o *heartbeat.Options) {
			if c.requestTimeout != 0 {
				o.RequestTimeout = c.requestTimeout
			}
		},
		Lease: func(_ int, o *lease.Options) {
			if c.requestTimeout != 0 {
				o.RequestTimeout = c.requestTimeout
			}
		},
		Pods:    podStep(pods),
		Setters: apiSetters(api),
		Shard:   shard,
	})
	if err != nil {
		return err
	}
	fmt.Printf("fleet: %d nodes %s0..%s%d, qps %.0f burst %d, workers %d, granularity %v, lease %v renewed every %v (built in %v)\n",
		c.nodes, c.prefix, c.prefix, c.nodes-1, c.qps, c.burst, c.workers, c.granularity, c.leaseDuration,
		cmpDur(c.renewInterval, c.leaseDuration/4), time.Since(started).Round(time.Millisecond))

	if c.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.duration)
		defer cancel()
	}
	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = fl.Run(runCtx)
	}()
	if pods != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = pods.Run(runCtx)
		}()
	}
	if nodeAPI != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := api.Serve(runCtx, nodeAPI); err != nil {
				fmt.Fprintln(os.Stderr, "fleet: node API:", err)
			}
		}()
	}
	defer func() { stopRun(); wg.Wait() }()

	var (
		readyAt              time.Duration
		allFresh             time.Duration
		maxAgeAfterFresh     time.Duration
		maxServerAgeAfterRdy time.Duration
		lastReq, lastFail    uint64
		lastCPU              = cpuTime()
		last                 = time.Now()
		maxRSS               uint64
		nextVerify           = time.Now().Add(c.verifyEvery)
		cpuAtReady           time.Duration
	)
	tick := time.NewTicker(c.printEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			total := time.Since(started)
			cpu := cpuTime()
			fmt.Printf("summary: %d nodes; all Ready after %v; all leases fresh after %v, oldest lease age since then %v (fleet's record), %v (API server, sampled every %v); CPU %.1f%% of a core over the run (%.1f%% until all Ready); max RSS %.0f MiB; requests %d, errors %d, refusals %d\n",
				c.nodes, readyAt.Round(100*time.Millisecond), allFresh.Round(time.Second), maxAgeAfterFresh.Round(100*time.Millisecond),
				maxServerAgeAfterRdy.Round(100*time.Millisecond), c.verifyEvery,
				100*cpu.Seconds()/total.Seconds(), 100*cpuAtReady.Seconds()/max(readyAt.Seconds(), 1e-9),
				float64(maxRSS)/(1<<20), cnt.requests.Load(), cnt.fails.Load(), cnt.refusals.Load())
			return nil
		case <-tick.C:
		}
		now := time.Now()
		elapsed := now.Sub(last)
		req, fail := cnt.requests.Load(), cnt.fails.Load()
		cpu := cpuTime()
		rss := rssBytes()
		maxRSS = max(maxRSS, rss)
		s := fl.Stats()
		fresh, running, oldest := fl.Freshness(c.leaseDuration)
		ready := -1
		if readyAt == 0 {
			ready = countReady(ctx, monitor, c.prefix)
			if ready == c.nodes {
				readyAt = now.Sub(started)
				cpuAtReady = cpu
			}
		}
		if allFresh == 0 && fresh == c.nodes {
			allFresh = now.Sub(started)
		}
		if allFresh != 0 {
			maxAgeAfterFresh = max(maxAgeAfterFresh, oldest)
		}
		line := fmt.Sprintf("t=%-6v registered=%d", now.Sub(started).Round(time.Second), s.Registered)
		if ready >= 0 {
			line += fmt.Sprintf(" ready=%d", ready)
		}
		line += fmt.Sprintf(" fresh=%d/%d oldest=%v req/s=%.0f errors=%d refusals=%d (failed: lease %d, status %d, register %d) cpu=%.1f%% rss=%.0fMiB",
			fresh, running, oldest.Round(100*time.Millisecond), float64(req-lastReq)/elapsed.Seconds(), fail, cnt.refusals.Load(),
			s.LeaseErrors, s.StatusErrors, s.RegisterErrors,
			100*(cpu-lastCPU).Seconds()/elapsed.Seconds(), float64(rss)/(1<<20))
		if c.verifyEvery > 0 && now.After(nextVerify) {
			nextVerify = now.Add(c.verifyEvery)
			if age, n, err := serverOldest(ctx, monitor, c.prefix); err == nil {
				line += fmt.Sprintf(" server: %d leases, oldest %v", n, age.Round(100*time.Millisecond))
				if allFresh != 0 {
					maxServerAgeAfterRdy = max(maxServerAgeAfterRdy, age)
				}
			}
		}
		fmt.Println(line)
		last, lastReq, lastFail, lastCPU = now, req, fail, cpu
		_ = lastFail
	}
}

// podStep is fleet.Options.Pods for pods, nil without.
func podStep(pods *kubeclient.FleetPods) func(fleet.PodNode) (fleet.PodStep, error) {
	if pods == nil {
		return nil
	}
	return pods.Node
}

// apiSetters is fleet.Options.Setters for the nodes' node API, nil without.
func apiSetters(api *fleetapi.Server) func(int, nodestatus.Setters) nodestatus.Setters {
	if api == nil {
		return nil
	}
	return api.Setters
}

func cmpDur(a, b time.Duration) time.Duration {
	if a != 0 {
		return a
	}
	return b
}

// listPages lists in pages of 500, so that checking a large fleet does not
// hold every object in the simulator's memory at once.
func listPages(ctx context.Context, opts metav1.ListOptions, list func(metav1.ListOptions) (string, error)) error {
	opts.Limit = 500
	for {
		next, err := list(opts)
		if err != nil || next == "" {
			return err
		}
		opts.Continue = next
	}
}

// countReady lists the fleet's nodes and counts the Ready ones.
func countReady(ctx context.Context, client *kubeclient.Client, prefix string) int {
	n := 0
	err := listPages(ctx, metav1.ListOptions{LabelSelector: prefixLabel + "=" + strings.TrimSuffix(prefix, "-")}, func(o metav1.ListOptions) (string, error) {
		list, err := client.Nodes().List(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			for _, c := range list.Items[i].Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					n++
				}
			}
		}
		return list.Continue, nil
	})
	if err != nil {
		return -1
	}
	return n
}

// serverOldest lists the leases and returns the age of the oldest renewTime
// among the fleet's.
func serverOldest(ctx context.Context, client *kubeclient.Client, prefix string) (time.Duration, int, error) {
	now := time.Now()
	var oldest time.Duration
	n := 0
	err := listPages(ctx, metav1.ListOptions{}, func(o metav1.ListOptions) (string, error) {
		list, err := client.Leases(corev1.NamespaceNodeLease).List(ctx, o)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			l := &list.Items[i]
			if !strings.HasPrefix(l.Name, prefix) || l.Spec.RenewTime == nil {
				continue
			}
			n++
			oldest = max(oldest, now.Sub(l.Spec.RenewTime.Time))
		}
		return list.Continue, nil
	})
	return oldest, n, err
}

func cleanup(ctx context.Context, client *kubeclient.Client, c config) error {
	sel := prefixLabel + "=" + strings.TrimSuffix(c.prefix, "-")
	if err := client.Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		return fmt.Errorf("delete nodes %s: %w", sel, err)
	}
	list, err := client.Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	names := make(chan string)
	var (
		wg      sync.WaitGroup
		deleted atomic.Int64
		failed  atomic.Int64
	)
	for range max(1, c.workers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				err := client.Leases(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
				switch {
				case err == nil:
					deleted.Add(1)
				case !apierrors.IsNotFound(err):
					failed.Add(1)
				}
			}
		}()
	}
	for _, l := range list.Items {
		if rest, ok := strings.CutPrefix(l.Name, c.prefix); ok {
			if _, err := strconv.Atoi(rest); err == nil {
				names <- l.Name
			}
		}
	}
	close(names)
	wg.Wait()
	fmt.Printf("cleanup: deleted the nodes labelled %s and %d leases (%d failures)\n", sel, deleted.Load(), failed.Load())
	if failed.Load() > 0 {
		return errors.New("some leases could not be deleted")
	}
	return nil
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssBytes returns the resident set size from /proc/self/statm (Linux).
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}
