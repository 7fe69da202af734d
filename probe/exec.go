package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/runtime"
)

// Exec runs action's command in target's container through the runtime's
// ExecSync with timeout. Exit code 0 is Success, any other Failure; both carry
// the combined stdout and stderr (at most MaxOutputBytes). A command that
// does not finish within timeout is a Failure whose message says so. As in
// kubelet, the runtime enforces timeout; the call itself may take
// HandlerOptions.ExecGrace (2m, kubelet's runtime request timeout) more
// before the probe gives up on a runtime that does not answer, which is
// also reported as a timeout. Other runtime errors are an Outcome with Err.
func (h *Handlers) Exec(ctx context.Context, action *corev1.ExecAction, target Target, timeout time.Duration) Outcome {
	if h.execer == nil {
		return Outcome{Result: Unknown, Err: ErrNoExecer}
	}
	if target.ContainerID == "" {
		return Outcome{Result: Unknown, Err: errors.New("exec probe: no container ID")}
	}
	cmd := action.Command
	if target.Container != nil {
		cmd = expandCommand(cmd, target.Container.Env)
	}
	id := bareContainerID(target.ContainerID)

	ctx, cancel := context.WithTimeout(ctx, timeout+h.execGrace)
	defer cancel()
	type answer struct {
		res *runtime.ExecResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		defer func() {
			if r := recover(); r != nil {
				a = answer{err: fmt.Errorf("%w: %v", ErrPanic, r)}
			}
			done <- a
		}()
		a.res, a.err = h.execer.ExecSync(ctx, id, cmd, timeout)
	}()
	var a answer
	select {
	case a = <-done:
	case <-ctx.Done():
		// The runtime ignored its deadline; leave it to finish on its own.
		a.err = ctx.Err()
	}
	if a.err != nil {
		if errors.Is(a.err, runtime.ErrExecTimeout) || errors.Is(a.err, context.DeadlineExceeded) {
			return Outcome{Result: Failure, Message: fmt.Sprintf("command timed out after %v: %v", timeout, a.err)}
		}
		return Outcome{Result: Unknown, Message: truncate(a.err.Error()), Err: fmt.Errorf("exec probe: %w", a.err)}
	}
	out := combinedOutput(a.res)
	if a.res.ExitCode == 0 {
		return Outcome{Result: Success, Message: out}
	}
	if out == "" {
		out = fmt.Sprintf("command exited with code %d", a.res.ExitCode)
	}
	return Outcome{Result: Failure, Message: out}
}

// combinedOutput is stdout then stderr, cut to MaxOutputBytes.
func combinedOutput(r *runtime.ExecResult) string {
	if r == nil {
		return ""
	}
	n := len(r.Stdout) + len(r.Stderr)
	if n > MaxOutputBytes {
		n = MaxOutputBytes
	}
	b := make([]byte, 0, n)
	b = append(b, r.Stdout[:min(len(r.Stdout), MaxOutputBytes)]...)
	b = append(b, r.Stderr[:min(len(r.Stderr), MaxOutputBytes-len(b))]...)
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// bareContainerID strips a "<runtime>://" prefix from a status container ID.
func bareContainerID(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		return id[i+3:]
	}
	return id
}

// expandCommand replaces $(NAME) in each argument with the value of the
// container's env var NAME when it has a literal value (no valueFrom), as
// kubelet does for probe commands; $$ stands for a literal $. Unknown or
// unterminated references are left as they are.
func expandCommand(cmd []string, env []corev1.EnvVar) []string {
	if len(env) == 0 {
		return cmd
	}
	need := false
	for _, a := range cmd {
		if strings.Contains(a, "$") {
			need = true
			break
		}
	}
	if !need {
		return cmd
	}
	vars := make(map[string]string, len(env))
	for _, e := range env {
		if e.ValueFrom == nil {
			vars[e.Name] = e.Value
		}
	}
	out := make([]string, len(cmd))
	for i, a := range cmd {
		out[i] = expandArg(a, vars)
	}
	return out
}

func expandArg(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
