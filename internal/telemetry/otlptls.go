package telemetry

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// otlpTLSConfig returns the TLS configuration of the OTLP/HTTP exporter, read
// from environ as the exporter reads the standard variables
// (OTEL_EXPORTER_OTLP_CERTIFICATE, _CLIENT_CERTIFICATE and _CLIENT_KEY, each
// also as OTEL_EXPORTER_OTLP_TRACES_*, which wins), and holding the exporter to
// TLS 1.3 at least, as every TLS connection agentd makes. It is nil when the
// exporter speaks plain http (an http:// or unix:// endpoint, or
// OTEL_EXPORTER_OTLP[_TRACES]_INSECURE=true), where the exporter refuses a TLS
// configuration. A file that does not load is an error naming its variable.
func otlpTLSConfig(environ []string) (*tls.Config, error) {
	env := make(map[string]string)
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, envOTLPPrefix) {
			if v = strings.TrimSpace(v); v != "" {
				env[strings.TrimPrefix(k, envOTLPPrefix)] = v
			}
		}
	}
	// The exporter's own order: the endpoints' schemes, then the INSECURE
	// variables; each later one overrides.
	insecure := false
	for _, k := range []string{"ENDPOINT", "TRACES_ENDPOINT"} {
		if v, ok := env[k]; ok {
			if u, err := url.Parse(v); err == nil {
				s := strings.ToLower(u.Scheme)
				insecure = s == "http" || s == "unix"
			}
		}
	}
	for _, k := range []string{"INSECURE", "TRACES_INSECURE"} {
		if v, ok := env[k]; ok {
			insecure = strings.EqualFold(v, "true")
		}
	}
	if insecure {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13}
	for _, k := range []string{"CERTIFICATE", "TRACES_CERTIFICATE"} {
		path, ok := env[k]
		if !ok {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", envOTLPPrefix, k, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s%s=%s: no PEM certificate in the file", envOTLPPrefix, k, path)
		}
		cfg.RootCAs = pool
	}
	for _, p := range [][2]string{{"CLIENT_CERTIFICATE", "CLIENT_KEY"}, {"TRACES_CLIENT_CERTIFICATE", "TRACES_CLIENT_KEY"}} {
		cert, okc := env[p[0]]
		key, okk := env[p[1]]
		if !okc || !okk {
			continue
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%s%s and %s%s: %w", envOTLPPrefix, p[0], envOTLPPrefix, p[1], err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
