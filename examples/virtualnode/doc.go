// Package virtualnode is a virtual node composed from nodekit's library in
// a page: a node that runs its pods somewhere else (here, in memory) through
// a podsync.PodSyncer of its own, with the kubelet's registration, lease,
// pod workers and status writes, and no CRI, cgroup or mount code linked
// (see example_test.go).
package virtualnode
