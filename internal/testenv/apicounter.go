package testenv

import (
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"

	"github.com/nodekit/nodekit/internal/apipath"
)

// APICounter counts the requests a client sends to the API server, by verb
// and resource, with the bytes of their bodies and of the responses (watch
// streams included, as they are read), and logs each request. Install it
// with rest.Config.WrapTransport = c.Wrap (or cfg.Wrap(c.Wrap)); one counter
// may wrap several clients. The zero value is ready to use.
type APICounter struct {
	mu    sync.Mutex
	count APICount
}

// APICalls are the figures of a set of requests.
type APICalls struct {
	Requests      int64
	RequestBytes  int64 // bodies sent
	ResponseBytes int64 // bodies read so far
}

// APICount is what an APICounter has counted.
type APICount struct {
	APICalls // every request

	// ByCall splits the figures by verb and resource, "GET secrets",
	// "WATCH configmaps", "PATCH pods/status", "POST serviceaccounts/token":
	// the verb is the HTTP method, or WATCH for a watch; the resource is
	// the path's resource with its subresource, or "other".
	ByCall map[string]APICalls

	// Log is each request's method and path, in the order sent.
	Log []string
}

// Wrap is a rest.Config.WrapTransport: it returns rt counted by c.
func (c *APICounter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return &countingTransport{next: rt, c: c}
}

// Count returns the figures since the counter was made or last taken.
func (c *APICounter) Count() APICount {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count.clone()
}

// Take returns Count and starts counting again from zero.
func (c *APICounter) Take() APICount {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.count
	c.count = APICount{}
	return out
}

// Calls returns the number of requests by call ("GET secrets").
func (a APICount) Calls() map[string]int {
	out := make(map[string]int, len(a.ByCall))
	for k, v := range a.ByCall {
		out[k] = int(v.Requests)
	}
	return out
}

// Verbs returns the figures by verb (GET, WATCH, PATCH...).
func (a APICount) Verbs() map[string]APICalls {
	out := map[string]APICalls{}
	for k, v := range a.ByCall {
		verb, _, _ := strings.Cut(k, " ")
		out[verb] = out[verb].add(v)
	}
	return out
}

// Sub returns what a counted after b, an earlier Count of the same counter
// (calls whose figures did not change are left out).
func (a APICount) Sub(b APICount) APICount {
	d := APICount{APICalls: a.APICalls.sub(b.APICalls), ByCall: map[string]APICalls{}}
	for k, v := range a.ByCall {
		if v != b.ByCall[k] {
			d.ByCall[k] = v.sub(b.ByCall[k])
		}
	}
	if len(b.Log) <= len(a.Log) {
		d.Log = append([]string(nil), a.Log[len(b.Log):]...)
	}
	return d
}

func (a APICalls) add(b APICalls) APICalls {
	return APICalls{a.Requests + b.Requests, a.RequestBytes + b.RequestBytes, a.ResponseBytes + b.ResponseBytes}
}

func (a APICalls) sub(b APICalls) APICalls {
	return APICalls{a.Requests - b.Requests, a.RequestBytes - b.RequestBytes, a.ResponseBytes - b.ResponseBytes}
}

func (a APICount) clone() APICount {
	a.ByCall = maps.Clone(a.ByCall)
	a.Log = append([]string(nil), a.Log...)
	return a
}

// add counts d for call (under c.mu).
func (c *APICounter) add(call string, d APICalls) {
	if c.count.ByCall == nil {
		c.count.ByCall = map[string]APICalls{}
	}
	c.count.APICalls = c.count.APICalls.add(d)
	c.count.ByCall[call] = c.count.ByCall[call].add(d)
}

type countingTransport struct {
	next http.RoundTripper
	c    *APICounter
}

// WrappedRoundTripper lets client-go find the transport below (to close its
// idle connections).
func (t *countingTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb := req.Method
	if req.URL.Query().Get("watch") == "true" {
		verb = "WATCH"
	}
	call := verb + " " + apipath.Resource(req.URL.Path)
	t.c.mu.Lock()
	t.c.add(call, APICalls{Requests: 1, RequestBytes: bodySize(req)})
	t.c.count.Log = append(t.c.count.Log, req.Method+" "+req.URL.Path)
	t.c.mu.Unlock()
	resp, err := t.next.RoundTrip(req)
	if resp != nil && resp.Body != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, c: t.c, call: call}
	}
	return resp, err
}

// bodySize is the size of req's body, read from a copy when the request
// does not say.
func bodySize(req *http.Request) int64 {
	switch {
	case req.Body == nil || req.Body == http.NoBody:
		return 0
	case req.ContentLength > 0:
		return req.ContentLength
	case req.GetBody != nil:
		b, err := req.GetBody()
		if err != nil {
			return 0
		}
		defer b.Close()
		n, _ := io.Copy(io.Discard, b)
		return n
	}
	return 0
}

type countingBody struct {
	io.ReadCloser
	c    *APICounter
	call string
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.c.mu.Lock()
		b.c.add(b.call, APICalls{ResponseBytes: int64(n)})
		b.c.mu.Unlock()
	}
	return n, err
}
