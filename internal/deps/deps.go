//go:build nodekitdeps

// Package deps pins the module's dependencies while packages are written.
package deps

import (
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/go-logr/logr"
	_ "github.com/opencontainers/image-spec/specs-go/v1"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/procfs"
	_ "go.uber.org/goleak"
	_ "golang.org/x/sys/unix"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/health/grpc_health_v1"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/client-go/tools/record"
	_ "k8s.io/cri-api/pkg/apis/runtime/v1"
	_ "k8s.io/klog/v2"
	_ "k8s.io/utils/clock/testing"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/yaml"
)
