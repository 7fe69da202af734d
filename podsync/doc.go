// Package podsync will make the container runtime match the desired pods and
// write pod status back: pod workers that run one pod's sandbox and containers
// through the runtime (init containers in order, restarts per restartPolicy,
// crash-loop back-off), a relist of the runtime's state, and a status writer.
//
// It is not written yet: the package holds no code, and nothing in nodekit
// depends on it.
package podsync
