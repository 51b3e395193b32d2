package sfu

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/twcc"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
)

// feedback is what a publisher connection with a direct path tells its
// sender about the packets it receives: transport-wide congestion control
// feedback (the browser's send-side bandwidth estimate runs on it; pion's
// twcc.Recorder builds it) and a NACK for each packet missing from a
// stream that negotiated NACKs. It stands in for pion's TWCC sender and
// NACK generator interceptors, which see only the packets that pass
// pion's read chain: a packet that goes direct passes none. Both ways
// record into it (seen: BindRemoteStream's reader for pion's, directIn
// for the direct path's), and one loop sends what is due every interval,
// as pion's did (100 ms each).
type feedback struct {
	start  time.Time
	sender uint32 // the SSRC the feedback is sent as

	mu      sync.Mutex // guards everything below
	rec     *twcc.Recorder
	streams map[uint32]*fbStream
	nacks   []uint16 // scratch for missing

	done   chan struct{}
	closed atomic.Bool
	wg     sync.WaitGroup
}

// fbStream is one received stream's part of the feedback.
type fbStream struct {
	twccID uint8    // the transport-wide sequence number's extension ID, 0 for none
	nack   *nackLog // nil if the stream did not negotiate NACKs
}

// feedbackInterval is how often feedback goes out.
const feedbackInterval = 100 * time.Millisecond

func newFeedback() *feedback {
	s := rand.Uint32() //nolint:gosec // an SSRC, not a secret
	return &feedback{start: time.Now(), sender: s, rec: twcc.NewRecorder(s), streams: map[uint32]*fbStream{}, done: make(chan struct{})}
}

// feedbackFactory makes a publisher connection's feedback and hands it
// to the connection's direct path.
type feedbackFactory struct{ x *directPub }

// NewInterceptor implements interceptor.Factory.
func (f feedbackFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	fb := newFeedback()
	f.x.fb.Store(fb)
	return &feedbackInterceptor{fb: fb}, nil
}

type feedbackInterceptor struct {
	interceptor.NoOp
	fb *feedback
}

// BindRTCPWriter starts the loop that writes the feedback.
func (i *feedbackInterceptor) BindRTCPWriter(w interceptor.RTCPWriter) interceptor.RTCPWriter {
	fb := i.fb
	if !fb.closed.Load() {
		fb.wg.Add(1)
		go fb.loop(w)
	}
	return w
}

// BindRemoteStream records the stream's packets that pion reads, if the
// stream has transport-wide sequence numbers or NACKs.
func (i *feedbackInterceptor) BindRemoteStream(info *interceptor.StreamInfo, r interceptor.RTPReader) interceptor.RTPReader {
	fb := i.fb
	if !fb.add(info) {
		return r
	}
	return interceptor.RTPReaderFunc(func(b []byte, a interceptor.Attributes) (int, interceptor.Attributes, error) {
		n, a, err := r.Read(b, a)
		if err != nil {
			return n, a, err
		}
		if a == nil {
			a = interceptor.Attributes{}
		}
		h, herr := a.GetRTPHeader(b[:n])
		if herr == nil {
			fb.seen(info.SSRC, h, time.Now())
		}
		return n, a, nil
	})
}

// UnbindRemoteStream forgets the stream.
func (i *feedbackInterceptor) UnbindRemoteStream(info *interceptor.StreamInfo) {
	i.fb.mu.Lock()
	delete(i.fb.streams, info.SSRC)
	i.fb.mu.Unlock()
}

// Close stops the loop.
func (i *feedbackInterceptor) Close() error {
	if !i.fb.closed.Swap(true) {
		close(i.fb.done)
	}
	i.fb.wg.Wait()
	return nil
}

// add notes a stream; false if it asks for no feedback.
func (fb *feedback) add(info *interceptor.StreamInfo) bool {
	st := &fbStream{}
	for _, e := range info.RTPHeaderExtensions {
		if e.URI == sdp.TransportCCURI && e.ID > 0 && e.ID < 256 {
			st.twccID = uint8(e.ID)
		}
	}
	for _, f := range info.RTCPFeedback {
		if f.Type == "nack" && f.Parameter == "" {
			st.nack = &nackLog{}
		}
	}
	if st.twccID == 0 && st.nack == nil {
		return false
	}
	fb.mu.Lock()
	fb.streams[info.SSRC] = st
	fb.mu.Unlock()
	return true
}

// seen records a packet of stream ssrc with header h that arrived at
// now.
func (fb *feedback) seen(ssrc uint32, h *rtp.Header, now time.Time) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	st := fb.streams[ssrc]
	if st == nil {
		return
	}
	if st.twccID != 0 {
		if ext := h.GetExtension(st.twccID); len(ext) >= 2 {
			fb.rec.Record(ssrc, uint16(ext[0])<<8|uint16(ext[1]), now.Sub(fb.start).Microseconds())
		}
	}
	if st.nack != nil {
		st.nack.add(h.SequenceNumber)
	}
}

// due is the feedback to send now: the transport-wide feedback since the
// last, and a NACK per stream with packets missing.
func (fb *feedback) due() (twccs, nacks []rtcp.Packet) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	twccs = fb.rec.BuildFeedbackPacket()
	for ssrc, st := range fb.streams {
		if st.nack == nil {
			continue
		}
		fb.nacks = st.nack.missing(fb.nacks[:0])
		if len(fb.nacks) > 0 {
			nacks = append(nacks, &rtcp.TransportLayerNack{SenderSSRC: fb.sender, MediaSSRC: ssrc,
				Nacks: rtcp.NackPairsFromSequenceNumbers(fb.nacks)})
		}
	}
	return twccs, nacks
}

func (fb *feedback) loop(w interceptor.RTCPWriter) {
	defer fb.wg.Done()
	t := time.NewTicker(feedbackInterval)
	defer t.Stop()
	for {
		select {
		case <-fb.done:
			return
		case <-t.C:
		}
		twccs, nacks := fb.due()
		if len(twccs) > 0 {
			_, _ = w.Write(twccs, nil)
		}
		if len(nacks) > 0 {
			_, _ = w.Write(nacks, nil)
		}
	}
}
