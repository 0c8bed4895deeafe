package bench

import (
	"math"
	"slices"
	"time"
)

// Summary is the distribution of one sample of latencies, in milliseconds.
type Summary struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

// summarize returns the p50 and p99 of ds (nearest rank).
func summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return Summary{N: len(s), P50: ms(rank(s, 0.50)), P99: ms(rank(s, 0.99))}
}

// rank is the nearest-rank percentile of sorted s.
func rank(s []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median returns the median of xs (the mean of the middle two for an even
// count), or NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// medianOf returns the median of f over the rounds.
func medianOf[T any](rounds []T, f func(T) float64) float64 {
	xs := make([]float64, 0, len(rounds))
	for _, r := range rounds {
		xs = append(xs, f(r))
	}
	return median(xs)
}

// ratio is a/b, or NaN when b is zero.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
