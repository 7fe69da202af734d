// Package hollownode is a hollow node composed from nodekit's library in a
// page: a node whose pods are simulated (podsync/podsynctest) with the
// kubelet's pod lifecycle, registered and reported through the real node
// half, all under a fake clock (see example_test.go).
package hollownode
