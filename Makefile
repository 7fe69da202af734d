# nodekit: the two commands users need are `make demo` and `make test`.

SHELL := /bin/bash
GO ?= go
# Nested modules with tests of their own (benchmarks against peer code). Each
# has its own go.mod so the library's go.mod stays lean.
NESTED_MODULES := $(shell find . -mindepth 2 -name go.mod -not -path './internal/testbin/*' -not -path '*/testdata/*' -exec dirname {} \; | sort)
TEST_FLAGS ?= -race -count=1 -timeout 30m
DEMO_SECONDS ?= 0

.PHONY: all test unit testbin containerd vet fmt-check no-testing check-consumer api-check demo clean-cache

all: test

## testbin: build (once) kube-apiserver, kube-controller-manager, kubelet, etcd, kubectl, metrics-server and containerd 2 for the tests.
testbin:
	@hack/testbin.sh >/dev/null

## containerd: install containerd, runc and busybox-static for the end-to-end tests (root only).
containerd:
	@if [ "$$(id -u)" = 0 ]; then hack/containerd-deps.sh >/dev/null; \
	else echo "make containerd: not root, end-to-end tests on containerd will be skipped" >&2; fi

vet:
	$(GO) vet ./...
	@for m in $(NESTED_MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# Packages that may link package testing: test suites and test harnesses in
# packages of their own (and the demo's local control plane, built on the
# test harness). Fakes (<pkg>test packages) may not: binaries embed them.
TESTING_ALLOWED := \
	github.com/nodekit/nodekit/runtime/runtimetest/contract \
	github.com/nodekit/nodekit/internal/containerdtest \
	github.com/nodekit/nodekit/internal/containerdtest/localcontainerd \
	github.com/nodekit/nodekit/internal/controlplane \
	github.com/nodekit/nodekit/internal/controlplane/localcluster

## no-testing: fail if a library package, a fake or an example binary links package testing.
no-testing:
	@bad=$$($(GO) list -f '{{.ImportPath}}{{range .Deps}} {{.}}{{end}}' ./... | \
		awk -v allowed="$(strip $(TESTING_ALLOWED))" 'BEGIN { n = split(allowed, a, " "); for (i = 1; i <= n; i++) ok[a[i]] = 1 } \
		!($$1 in ok) { for (i = 2; i <= NF; i++) if ($$i == "testing") { print $$1; break } }'); \
	if [ -n "$$bad" ]; then echo "these packages link package testing (move test code to a package of its own):"; echo "$$bad"; exit 1; fi

## check-consumer: fail if a program importing nodekit gets nodekit's test-only modules (needs the Go module proxy).
check-consumer:
	@hack/check-consumer.sh

## api-check: fail if an exported identifier changed incompatibly since v0.1.0 and CHANGELOG.md does not name it.
api-check:
	@hack/api-check.sh

## unit: the tests that need nothing from the machine.
unit:
	$(GO) test -short $(TEST_FLAGS) ./...

## test: every test: unit, integration (real kube-apiserver) and end-to-end (real containerd).
test: testbin containerd vet fmt-check no-testing check-consumer api-check
	KUBEBUILDER_ASSETS=$$(hack/testbin.sh) $(GO) test $(TEST_FLAGS) ./...
	@for m in $(NESTED_MODULES); do echo "== $$m"; (cd $$m && $(GO) test $(TEST_FLAGS) ./...) || exit 1; done

## demo: run examples/agent on a local control plane (DEMO_SECONDS=60 for a bounded run).
demo: testbin
	@KUBEBUILDER_ASSETS=$$(hack/testbin.sh) DEMO_SECONDS=$(DEMO_SECONDS) RUNTIME=$(RUNTIME) hack/demo.sh
