package containerdtest

import "testing"

// LogTail's cut: the last lines, or from a crash's first line on.
func TestLogTail(t *testing.T) {
	plain := "a\nb\nc\nd\n"
	if got := logTail([]byte(plain), 2); got != "c\nd" {
		t.Errorf("plain log, 2 lines: %q", got)
	}
	crashed := "a\nb\nfatal error: concurrent map iteration and map write\n\ngoroutine 1 [running]:\nx.List()\ngoroutine 2 [select]:\ny()\n"
	if got := logTail([]byte(crashed), 4); got != "fatal error: concurrent map iteration and map write\n\ngoroutine 1 [running]:\nx.List()" {
		t.Errorf("crashed log, 4 lines: %q", got)
	}
	panicked := "a\npanic: boom\n\ngoroutine 1 [running]:\n"
	if got := logTail([]byte(panicked), 10); got != "panic: boom\n\ngoroutine 1 [running]:" {
		t.Errorf("panicked log, 10 lines: %q", got)
	}
}
