package heartbeat

import "time"

// PostState is what a HeartbeatStrategy decides on.
type PostState struct {
	// Changed reports whether the computed status differs from the node it
	// was computed from (the newest known: as last written, or as the watch
	// of the Node last saw it under Run), heartbeat timestamps ignored.
	Changed bool
	// NeverPosted is true until the first status post since start-up (or
	// since the node was registered again). Creating the Node with its
	// computed status counts as a post; finding it registered already does
	// not.
	NeverPosted bool
	// SinceLastPost is the time since the last successful status post.
	SinceLastPost time.Duration
	// ReportFrequency is the report period in force for this round
	// (Options.NodeStatusReportFrequency, shifted at random after a change
	// so that nodes spread their reports, as kubelet does).
	ReportFrequency time.Duration
}

// HeartbeatStrategy decides how a node tells the control plane it is alive.
type HeartbeatStrategy interface {
	// UsesLease reports whether the node Lease is renewed as the heartbeat.
	UsesLease() bool
	// ShouldPost reports whether a computed status must be posted now.
	ShouldPost(PostState) bool
}

// StatusOnlyStrategy is the strategy without a lease: the status itself is the
// heartbeat and is posted every update frequency, changed or not.
func StatusOnlyStrategy() HeartbeatStrategy { return statusOnly{} }

// LeaseStrategy is the default strategy: the Lease is renewed every renew interval
// (10s) and the status is posted only when it changed (heartbeat timestamps
// ignored) or when the report frequency (5m) has passed since the last post.
func LeaseStrategy() HeartbeatStrategy { return leaseStrategy{} }

type statusOnly struct{}

func (statusOnly) UsesLease() bool           { return false }
func (statusOnly) ShouldPost(PostState) bool { return true }
func (statusOnly) String() string            { return "StatusOnly" }

type leaseStrategy struct{}

func (leaseStrategy) UsesLease() bool { return true }
func (leaseStrategy) ShouldPost(s PostState) bool {
	return s.Changed || s.NeverPosted || s.SinceLastPost >= s.ReportFrequency
}
func (leaseStrategy) String() string { return "Lease" }

// CustomStrategy is a HeartbeatStrategy made of a lease switch and a
// decision function.
type CustomStrategy struct {
	// UseLease: the lease is renewed as the heartbeat.
	UseLease bool
	// Post decides whether a computed status is posted.
	Post func(PostState) bool
}

// UsesLease returns s.UseLease.
func (s CustomStrategy) UsesLease() bool { return s.UseLease }

// ShouldPost calls s.Post.
func (s CustomStrategy) ShouldPost(p PostState) bool { return s.Post(p) }

var (
	_ HeartbeatStrategy = CustomStrategy{}
	_ HeartbeatStrategy = statusOnly{}
	_ HeartbeatStrategy = leaseStrategy{}
)
