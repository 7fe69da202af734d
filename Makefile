# nodekit: the two commands users need are `make demo` and `make test`.

SHELL := /bin/bash
GO ?= go
# Nested modules with tests of their own (benchmarks against peer code). Each
# has its own go.mod so the library's go.mod stays lean.
NESTED_MODULES := $(shell find . -mindepth 2 -name go.mod -not -path './internal/testbin/*' -exec dirname {} \; | sort)
TEST_FLAGS ?= -race -count=1 -timeout 30m
DEMO_SECONDS ?= 0

.PHONY: all test unit testbin containerd vet fmt-check demo clean-cache

all: test

## testbin: build (once) kube-apiserver, kube-controller-manager, kubelet, etcd and kubectl for the tests.
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

## unit: the tests that need nothing from the machine.
unit:
	$(GO) test -short $(TEST_FLAGS) ./...

## test: every test: unit, integration (real kube-apiserver) and end-to-end (real containerd).
test: testbin containerd vet fmt-check
	KUBEBUILDER_ASSETS=$$(hack/testbin.sh) $(GO) test $(TEST_FLAGS) ./...
	@for m in $(NESTED_MODULES); do echo "== $$m"; (cd $$m && $(GO) test $(TEST_FLAGS) ./...) || exit 1; done

## demo: run examples/agent on a local control plane (DEMO_SECONDS=60 for a bounded run).
demo: testbin
	@KUBEBUILDER_ASSETS=$$(hack/testbin.sh) DEMO_SECONDS=$(DEMO_SECONDS) RUNTIME=$(RUNTIME) hack/demo.sh
