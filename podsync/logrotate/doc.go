// Package logrotate rotates the logs of running containers as the
// kubelet's container log manager does: the runtime writes each
// container's log (CRI log format) to the path in its status; once a log
// reaches Options.MaxSize (10 MiB) it is renamed <log>.<YYYYMMDD-HHMMSS>
// and the runtime is asked to reopen it (CRI ReopenContainerLog; if that
// fails the name is given back). At most Options.MaxFiles (5) files are
// kept per container, the one being written included: before a rotation the
// oldest rotated files beyond MaxFiles-2 are removed, and after it every
// rotated file but the newest is gzipped (<name>.gz, written through a .tmp
// file, so an interrupted compression leaves only the original). A log the
// runtime has not reopened after a rotation is reopened at the next look; a
// container removed meanwhile is skipped.
//
// SyncOnce looks once; Run looks every Options.MonitorInterval (10s) until
// its context ends. Disk use per container is bounded by MaxSize times
// MaxFiles, plus, for a container that writes more than MaxSize between
// two looks, up to three times what it writes between two looks (the log
// being written, the newest rotated file, kept uncompressed as by the
// kubelet, and one being compressed): a container writing 1 GiB at
// 68 MiB/s with 3s looks peaked at 474 MiB (TestAgentBadInput in
// examples/agent). Rotated files are compressed at gzip's fastest level.
//
// Containers are handled one after the other (the kubelet's
// containerLogMaxWorkers default, 1); logs of exited containers are not
// rotated (the kubelet's neither: they no longer grow).
//
// # Differences from the kubelet
//
// The log is renamed and reopened before, not after, the older rotated
// files are compressed, so that a container writing fast starts a new file
// at once rather than after seconds of compression.
//
// A container's log path, fixed when it is created, is asked of the
// runtime (ContainerStatus) at the first look that finds the container
// running and kept while it runs; the kubelet asks for every running
// container at every look, 250 calls every 10s on a node of 250 pods.
package logrotate
