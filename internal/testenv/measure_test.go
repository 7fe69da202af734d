package testenv

import (
	"os"
	"runtime"
	"testing"
)

func TestProcReaders(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	pid := os.Getpid()
	rss, err := ProcRSS(pid)
	if err != nil || rss <= 0 {
		t.Fatalf("ProcRSS = %d, %v", rss, err)
	}
	hwm, err := ProcHWM(pid)
	if err != nil || hwm < rss {
		t.Fatalf("ProcHWM = %d, %v; want at least VmRSS %d", hwm, err, rss)
	}
	if _, err := ProcStatusBytes(pid, "Name"); err == nil {
		t.Error("ProcStatusBytes(Name): want an error for a field not in kB")
	}
	if _, err := ProcCPUTicks(pid); err != nil {
		t.Fatalf("ProcCPUTicks: %v", err)
	}
}
