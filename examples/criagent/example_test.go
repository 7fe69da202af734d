package criagent_test

import (
	"context"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/podsync/cri"
	"github.com/nodekit/nodekit/podsync/cri/backend"
	"github.com/nodekit/nodekit/podsync/nodeapi"
	"github.com/nodekit/nodekit/podsync/volume"
	"github.com/nodekit/nodekit/runtime/remote"
)

// A node agent on containerd: it registers "edge-1" with the API server
// as system:node:edge-1, runs the pods bound to it and the static pods of
// /etc/kubernetes/manifests, and serves the node API to kubectl through
// the API server. It needs a cluster and a runtime, so it is compiled, not
// run.
func Example() {
	const name = "edge-1"
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background())
	reg := prometheus.NewRegistry()

	// The API server, as the node's identity.
	restConfig, err := clientcmd.BuildConfigFromFlags("", "/var/lib/kubelet/kubeconfig")
	if err != nil {
		panic(err)
	}
	client, err := nodekit.NewClient(restConfig)
	if err != nil {
		panic(err)
	}

	// The runtime, connected in the background and again when it comes back.
	rt, err := remote.NewConn(remote.ConnOptions{Options: remote.Options{Endpoint: "unix:///run/containerd/containerd.sock"}})
	if err != nil {
		panic(err)
	}

	// The pod half on the runtime, then the node half that reports it.
	be := backend.New(backend.Options{
		Syncer: cri.Options{Runtime: rt, PodRoot: "/var/lib/kubelet/pods", PodLogRoot: "/var/log/pods",
			CgroupsPerQOS: true, ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"},
		Volume:     volume.WithClients(volume.Options{}, client),
		PauseImage: "registry.k8s.io/pause:3.10",
	})
	node := nodekit.NodeTemplate(name, map[string]string{"topology.kubernetes.io/zone": "edge"})
	status := nodestatus.Options{Runtime: rt}
	pods, err := nodekit.NewPodHalf(nodekit.PodHalfOptions{NodeName: name, API: client.API(), Backend: be.Build,
		ManifestPath: "/etc/kubernetes/manifests", LocalNode: nodekit.LocalNode(node, status), Execer: rt, Registerer: reg})
	if err != nil {
		panic(err)
	}
	nodeHalf, err := nodekit.NewNodeHalf(nodekit.NodeHalfOptions{NodeName: name, API: client.API(), Node: node,
		Status: status, Pods: pods, Registerer: reg})
	if err != nil {
		panic(err)
	}

	// The node API: logs, exec, attach, port-forward, stats and metrics,
	// authenticated by the API server's TokenReview and authorized by its
	// SubjectAccessReview, as the kubelet's port 10250.
	ln, err := net.Listen("tcp", ":10250")
	if err != nil {
		panic(err)
	}
	nodeAPI, err := nodeapi.NewPort(nodeapi.PortOptions{NodeName: name, Listener: ln, Pods: pods, Registerer: reg,
		Handler: nodeapi.Options{PodLogRoot: "/var/log/pods", Stats: be.Usage(), Runtime: rt},
		Server: nodeapi.ServerOptions{CertDir: "/var/lib/kubelet/pki",
			Auth: nodeapi.AuthOptions{TokenReviews: client.TokenReviews(), SubjectAccessReviews: client.SubjectAccessReviews()}}})
	if err != nil {
		panic(err)
	}

	// Everything runs until a signal, and stops in reverse order.
	var agent nodekit.Group
	_ = agent.Add("runtime", rt)
	_ = agent.Add("pods", pods)
	_ = agent.Add("node", nodeHalf)
	_ = agent.Add("node API", nodeAPI)
	if err := agent.Run(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Agent failed")
		os.Exit(1)
	}
}
