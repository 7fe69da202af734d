package nodekit

import (
	"io"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/internal/apipath"
	"github.com/nodekit/nodekit/internal/promutil"
)

// Metrics of an agent's API traffic (CountRequests), by the names the
// kubelet side-by-side scripts read.
const (
	MetricAPIRequests      = "nodekit_agent_api_requests_total"
	MetricAPIRequestBytes  = "nodekit_agent_api_request_bytes_total"
	MetricAPIResponseBytes = "nodekit_agent_api_response_bytes_total"
)

// apiCounter counts an agent's requests to the API server by verb, resource
// and status code, and the bytes of their bodies. It wraps the REST client's
// transport, so it sees every request the agent makes, retries included.
type apiCounter struct {
	requests      *prometheus.CounterVec
	requestBytes  *prometheus.CounterVec
	responseBytes *prometheus.CounterVec
}

func newAPICounter(reg prometheus.Registerer) (*apiCounter, error) {
	c := &apiCounter{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricAPIRequests,
			Help: "Requests the agent sent to the API server, by HTTP method, resource and status code (code 0: no response).",
		}, []string{"verb", "resource", "code"}),
		requestBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricAPIRequestBytes,
			Help: "Bytes of request bodies the agent sent to the API server, by HTTP method and resource.",
		}, []string{"verb", "resource"}),
		responseBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricAPIResponseBytes,
			Help: "Bytes of response bodies the agent read from the API server, by HTTP method and resource.",
		}, []string{"verb", "resource"}),
	}
	var err error
	for _, col := range []**prometheus.CounterVec{&c.requests, &c.requestBytes, &c.responseBytes} {
		if *col, err = promutil.Register(reg, *col); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// CountRequests registers the metrics of an agent's API traffic with reg
// (requests by verb, resource and code; request and response bytes by verb
// and resource) and returns the rest.Config.WrapTransport that counts them:
// cfg.Wrap(wrap). It sees every request of the client, retries included.
func CountRequests(reg prometheus.Registerer) (wrap func(http.RoundTripper) http.RoundTripper, err error) {
	c, err := newAPICounter(reg)
	if err != nil {
		return nil, err
	}
	return c.wrap, nil
}

func (c *apiCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return &countingTransport{next: rt, c: c}
}

type countingTransport struct {
	next http.RoundTripper
	c    *apiCounter
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, res := req.Method, apipath.Resource(req.URL.Path)
	if req.ContentLength > 0 {
		t.c.requestBytes.WithLabelValues(verb, res).Add(float64(req.ContentLength))
	}
	resp, err := t.next.RoundTrip(req)
	code := "0"
	if resp != nil {
		code = strconv.Itoa(resp.StatusCode)
		if resp.Body != nil {
			resp.Body = &countingBody{ReadCloser: resp.Body, counter: t.c.responseBytes.WithLabelValues(verb, res)}
		}
	}
	t.c.requests.WithLabelValues(verb, res, code).Inc()
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	counter prometheus.Counter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.counter.Add(float64(n))
	}
	return n, err
}
