package rtcbench

// delayer is a server that reports its own forwarding delay (Convene's
// convene_webrtc_forward_delay_seconds histogram): how much of the
// latency the subscribers see is the server's queueing.
type delayer interface {
	delayBuckets() map[float64]float64 // upper bound (s) → cumulative count
}

// DelayMetric is Convene's histogram of its own forwarding delay, from a
// packet queued for a WebRTC subscriber until it is sent.
const DelayMetric = "convene_webrtc_forward_delay_seconds"

func (n *conveneNode) delayBuckets() map[float64]float64 { return n.Histogram(DelayMetric) }
