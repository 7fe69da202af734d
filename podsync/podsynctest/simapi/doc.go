// Package simapi serves a simulated node's node API (podsync/nodeapi)
// from podsync/podsynctest's Backend: a summary of its running containers'
// CPU and memory by the rules (podsynctest.Rules.Usage and CPUTime) plus
// the node's own, with a node CPU counter that only grows, and a log line
// per container run (Backend.Runs). heartbeat/fleet/fleetapi serves one
// for every node of a fleet.
package simapi
