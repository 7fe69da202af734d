package containerdtest

import "strings"

// ContainerPid reads the container's host process ID ("pid": N) from the
// "info" entry of a verbose CRI ContainerStatus; 0 when it has none.
func ContainerPid(info string) int {
	_, rest, ok := strings.Cut(info, `"pid":`)
	if !ok {
		return 0
	}
	n := 0
	for _, r := range strings.TrimSpace(rest) {
		if r < '0' || r > '9' {
			break
		}
		n = n*10 + int(r-'0')
	}
	return n
}
