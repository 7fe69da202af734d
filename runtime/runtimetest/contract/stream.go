package contract

import (
	"net/url"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/runtime"
)

// fakeStreamURL is the streaming server the suite gives a fake; nothing
// listens there, the suite only checks the URLs handed out.
const fakeStreamURL = "http://127.0.0.1:10010"

// checkStreamURL checks that u is an absolute http(s) URL with a host.
func (s *suite) checkStreamURL(method, u string) {
	s.t.Helper()
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		s.t.Errorf("%s URL %q: want an absolute http(s) URL (%v)", method, u, err)
	}
}

// streaming checks Exec, Attach and PortForward: a URL for a running
// container and a ready sandbox, an error for streams no CRI server
// accepts, and NotFound for a missing container.
func (s *suite) streaming() {
	if s.target.Fake != nil {
		s.target.Fake.SetStreamURL(fakeStreamURL)
	}
	sb, id := s.runningContainer()

	u, err := s.rt.Exec(s.ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"echo", "hi"}, Stdout: true, Stderr: true})
	if err != nil {
		s.t.Fatalf("Exec: %v", err)
	}
	s.checkStreamURL("Exec", u)
	u2, err := s.rt.Exec(s.ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"cat"}, Stdin: true, Stdout: true, Tty: true})
	if err != nil {
		s.t.Fatalf("Exec with stdin and a tty: %v", err)
	}
	s.checkStreamURL("Exec", u2)
	if u2 == u {
		s.t.Errorf("two Exec calls gave the same URL %q, want one per session", u)
	}

	u, err = s.rt.Attach(s.ctx, &runtimeapi.AttachRequest{ContainerId: id, Stdout: true, Stderr: true})
	if err != nil {
		s.t.Fatalf("Attach: %v", err)
	}
	s.checkStreamURL("Attach", u)

	u, err = s.rt.PortForward(s.ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sb, Port: []int32{8080}})
	if err != nil {
		s.t.Fatalf("PortForward: %v", err)
	}
	s.checkStreamURL("PortForward", u)

	if _, err := s.rt.Exec(s.ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}}); err == nil {
		s.t.Errorf("Exec with no stdin, stdout or stderr: nil error, want one")
	}
	if _, err := s.rt.Exec(s.ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}, Stdout: true, Stderr: true, Tty: true}); err == nil {
		s.t.Errorf("Exec with a tty and stderr: nil error, want one")
	}
	if _, err := s.rt.Exec(s.ctx, &runtimeapi.ExecRequest{ContainerId: missingContainer, Cmd: []string{"true"}, Stdout: true}); !runtime.IsNotFound(err) {
		s.t.Errorf("Exec in a missing container: %v, want NotFound", err)
	}
	if _, err := s.rt.Attach(s.ctx, &runtimeapi.AttachRequest{ContainerId: missingContainer, Stdout: true}); !runtime.IsNotFound(err) {
		s.t.Errorf("Attach to a missing container: %v, want NotFound", err)
	}
	if _, err := s.rt.PortForward(s.ctx, &runtimeapi.PortForwardRequest{PodSandboxId: missingSandbox}); !runtime.IsNotFound(err) {
		s.t.Errorf("PortForward into a missing sandbox: %v, want NotFound", err)
	}
}
