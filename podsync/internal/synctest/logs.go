package synctest

import (
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// LogLines keeps the messages of a logger, for tests that check what an
// engine logged.
type LogLines struct {
	mu    sync.Mutex
	lines []string
}

// Logger returns a logger that writes into l.
func (l *LogLines) Logger() logr.Logger {
	return funcr.New(func(_, args string) {
		l.mu.Lock()
		l.lines = append(l.lines, args)
		l.mu.Unlock()
	}, funcr.Options{})
}

// Count returns how many lines have the message msg.
func (l *LogLines) Count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, `"msg"="`+msg) {
			n++
		}
	}
	return n
}

// Lines returns a copy of the lines kept.
func (l *LogLines) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}
