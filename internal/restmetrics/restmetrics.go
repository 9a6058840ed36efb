package restmetrics

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/metrics"
)

// latencyBuckets are component-base's for request and rate limiter latency.
var latencyBuckets = []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0}

var (
	requestLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_duration_seconds",
		Help:    "Request latency in seconds. Broken down by verb, and host.",
		Buckets: latencyBuckets,
	}, []string{"verb", "host"})
	rateLimiterLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_rate_limiter_duration_seconds",
		Help:    "Client side rate limiter latency in seconds. Broken down by verb, and host.",
		Buckets: latencyBuckets,
	}, []string{"verb", "host"})
	requestResult = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "Number of HTTP requests, partitioned by status code, method, and host.",
	}, []string{"code", "method", "host"})
	requestRetry = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_request_retries_total",
		Help: "Number of request retries, partitioned by status code, verb, and host.",
	}, []string{"code", "verb", "host"})
)

var install sync.Once

// Install points client-go's request metrics at this package's
// collectors. Call it before the first API client is built; later calls
// do nothing.
func Install() {
	install.Do(func() {
		metrics.Register(metrics.RegisterOpts{
			RequestLatency:     latency{requestLatency},
			RateLimiterLatency: latency{rateLimiterLatency},
			RequestResult:      result{},
			RequestRetry:       retry{},
		})
	})
}

// Collectors are the rest_client_* families, to register with the
// daemon's registry.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{requestLatency, rateLimiterLatency, requestResult, requestRetry}
}

type latency struct{ h *prometheus.HistogramVec }

func (l latency) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	l.h.WithLabelValues(verb, u.Host).Observe(d.Seconds())
}

type result struct{}

func (result) Increment(_ context.Context, code, method, host string) {
	requestResult.WithLabelValues(code, method, host).Inc()
}

type retry struct{}

func (retry) IncrementRetry(_ context.Context, code, verb, host string) {
	requestRetry.WithLabelValues(code, verb, host).Inc()
}
