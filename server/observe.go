package server

import (
	"net/http"
)

// MetricsPath is where the main listener serves Prometheus metrics, to
// operators only.
const MetricsPath = "/metrics"

// operatorHTTP serves next to authenticated operators only; any other caller
// the authentication middleware let through gets 403, and its connection is
// closed (refuse).
func operatorHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, _ := IdentityFrom(r.Context()); !id.Operator() {
			refuse(w, r, http.StatusForbidden, "operators only")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// metricMethod is the method label of a request's metrics and span name: the
// method when this server has it (A2A 0.3, A2A 1.0, or an a2a.* operator
// method), else "unknown", so a caller cannot grow the label set.
func (rh *rpcHandler) metricMethod(method string) string {
	if _, ok := rh.methods[method]; ok {
		return method
	}
	return "unknown"
}
