// Package nodestatustest provides fakes for the nodestatus package: a Host
// that serves facts it is given, a plausible set of facts for a simulated
// node, and a RuntimeInfo with a settable version, status and image list.
// They are cheap (a pass reads them without allocating), so a process can
// run thousands of simulated nodes, and safe for concurrent use, so a test
// can change a node's facts while its status is being computed.
package nodestatustest
