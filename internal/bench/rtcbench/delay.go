package rtcbench

import (
	"bufio"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// delayer is a server that reports its own forwarding delay (Convene's
// convene_webrtc_forward_delay_seconds histogram): how much of the
// latency the subscribers see is the server's queueing.
type delayer interface {
	delayBuckets() map[float64]float64 // upper bound (s) → cumulative count
}

const delayMetric = "convene_webrtc_forward_delay_seconds_bucket"

func (n *conveneNode) delayBuckets() map[float64]float64 {
	req, _ := http.NewRequest("GET", n.URL+"/metrics", nil)
	req.Header.Set("X-API-Key", n.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	out := map[float64]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, delayMetric+"{") {
			continue
		}
		_, rest, _ := strings.Cut(line, `le="`)
		le, rest, _ := strings.Cut(rest, `"`)
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		bound, err := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
		if err != nil {
			continue
		}
		out[bound] = v
	}
	return out
}

// delayPct is the p-th percentile (ms) of what the histogram counted
// between a and b, as the upper bound of the bucket it falls in.
func delayPct(a, b map[float64]float64, p float64) float64 {
	var bounds []float64
	for k := range b {
		bounds = append(bounds, k)
	}
	if len(bounds) == 0 {
		return 0
	}
	sort.Float64s(bounds)
	total := b[bounds[len(bounds)-1]] - a[bounds[len(bounds)-1]]
	if total <= 0 {
		return 0
	}
	for _, k := range bounds {
		if b[k]-a[k] >= p*total {
			return k * 1000
		}
	}
	return bounds[len(bounds)-1] * 1000
}
