package bench

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/admit"
	"github.com/agentd/agentd/tlsconfig"
)

// BenchmarkFrontAdmission is figure 2's agentd front (mTLS keep-alive on
// loopback, SPIFFE authentication, JSON-RPC, the engine and store, the
// executor and router over the instant provider) in this process, twice:
// without admission control and with it (a 1 GiB pod's bounds, as serve
// derives them). Each iteration is one round: 16 workers send blocking
// message/send to a completed task for a window on one server, then on the
// other (which goes first alternates), so both see the same machine. It
// reports each side's req/s over every round and the median of the rounds'
// on/off ratios, the figure that says what admission costs.
//
//	go test -run '^$' -bench FrontAdmission -benchtime 20x ./bench
func BenchmarkFrontAdmission(b *testing.B) {
	dir := b.TempDir()
	if err := mintCerts(dir); err != nil {
		b.Fatal(err)
	}
	const conc, window = 16, 250 * time.Millisecond
	type side struct {
		url    string
		client *http.Client
		reqs   float64
		secs   float64
	}
	var sides [2]*side // off, on
	for i, adm := range []*admit.Controller{nil, podAdmission()} {
		url, stop := serveFrontInProcess(b, dir, adm)
		defer stop()
		client, err := benchClient(dir, conc)
		if err != nil {
			b.Fatal(err)
		}
		defer client.CloseIdleConnections()
		if _, err := load(context.Background(), client, url, conc, 200*time.Millisecond); err != nil { // warm up
			b.Fatal(err)
		}
		sides[i] = &side{url: url, client: client}
	}
	var ratios []float64
	b.ResetTimer()
	for round := 0; b.Loop(); round++ {
		var rps [2]float64
		for k := 0; k < 2; k++ {
			i := (round + k) % 2
			res, err := load(context.Background(), sides[i].client, sides[i].url, conc, window)
			if err != nil {
				b.Fatal(err)
			}
			rps[i] = res.RPS
			sides[i].reqs += res.RPS * window.Seconds()
			sides[i].secs += window.Seconds()
		}
		ratios = append(ratios, rps[1]/rps[0])
	}
	sort.Float64s(ratios)
	b.ReportMetric(sides[0].reqs/sides[0].secs, "off-req/s")
	b.ReportMetric(sides[1].reqs/sides[1].secs, "on-req/s")
	b.ReportMetric(ratios[len(ratios)/2], "on/off")
	b.ReportMetric(0, "ns/op")
}

// serveFrontInProcess serves frontHandler over mTLS on loopback until stop.
func serveFrontInProcess(tb testing.TB, dir string, adm *admit.Controller) (url string, stop func()) {
	tb.Helper()
	src, ln, err := roleListen(dir)
	if err != nil {
		tb.Fatal(err)
	}
	url = "https://" + ln.Addr().String() + "/"
	log := slog.New(slog.DiscardHandler)
	h, err := frontHandler(newInstantEngine(10000, url, adm), src, url, log)
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: tlsconfig.ServerConfig(src), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)}
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	return url, func() {
		srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			tb.Error(err)
		}
		src.Close()
	}
}
