package sfu

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
	"golang.org/x/sys/unix"
)

// BenchmarkEgress isolates the SRTP send path of subscriber connections:
// N subscribers, each an audio (Opus) and a video (VP8) track on a
// connection the node's engine built (single UDP port, the node's
// interceptors: GCC and TWCC numbers on video, RTCP reports), to N pion
// receivers on loopback that read and give feedback like a browser. One
// goroutine, locked to its thread, writes one packet per subscriber per
// round, then ends the burst as the SFU's writer does (batch=true: the
// writes in between leave in sendmmsg batches; false: one sendto each), paced at a round
// every 2 ms (a fan-out of 500 publisher packets a second).
//
// pkts/core-s is packets sent per second of that thread's CPU time, which
// includes the kernel's work in sendto (on loopback also the receiving
// socket's). Work on other goroutines (RTCP, feedback) is not in it; the
// full picture is convene-bench webrtc.
//
// direct=true sends the audio the direct way (direct.go), as the node does
// for a browser, which answers as the DTLS client; video stays on pion's
// chain.
func BenchmarkEgress(b *testing.B) {
	for _, n := range []int{50, 150} {
		for _, batched := range []bool{false, true} {
			b.Run(fmt.Sprintf("subs=%d/batch=%v", n, batched), func(b *testing.B) { benchEgress(b, n, batched, false) })
		}
		b.Run(fmt.Sprintf("subs=%d/batch=true/direct=true", n), func(b *testing.B) { benchEgress(b, n, true, true) })
	}
}

func benchEgress(b *testing.B, n int, batched, direct bool) {
	l, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	port := l.LocalAddr().(*net.UDPAddr).Port
	l.Close()
	s, err := New(Config{Addr: netip.MustParseAddr("127.0.0.1"), UDPPort: port}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var tracks []*localTrack
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for range n {
		var x *directOut
		if direct {
			x = s.eng.direct()
		}
		pc, err := s.eng.newPC(func(ccEstimator) {}, x, nil)
		if err != nil {
			b.Fatal(err)
		}
		closers = append(closers, func() { pc.Close() })
		for _, c := range []webrtc.RTPCodecCapability{codecOpus.RTPCodecCapability, codecVP8.RTPCodecCapability} {
			t, err := newLocalTrack(c, c.MimeType, "s")
			if err != nil {
				b.Fatal(err)
			}
			if x != nil && c.MimeType == codecOpus.MimeType {
				t.direct = x
			}
			if _, err := pc.AddTrack(t); err != nil {
				b.Fatal(err)
			}
			tracks = append(tracks, t)
		}
		rx, err := newReceiver()
		if err != nil {
			b.Fatal(err)
		}
		closers = append(closers, func() { rx.Close() })
		if err := connect(pc, rx); err != nil {
			b.Fatal(err)
		}
		if x != nil && !x.start(pc) {
			b.Fatal("the direct path did not open")
		}
	}
	for _, t := range tracks {
		for t.bound.Load() == nil {
			time.Sleep(time.Millisecond)
		}
	}
	audio, video := make([]byte, 80), make([]byte, 1100)
	video[0] = 0x10 // VP8 descriptor: start of partition
	hs := make([]rtp.Header, len(tracks))

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var sent, failed int
	cpu0 := threadCPU()
	b.ResetTimer()
	next := time.Now()
	for i := range b.N {
		if batched {
			s.eng.hold()
		}
		for j, t := range tracks {
			h := &hs[j]
			h.Version, h.SequenceNumber, h.Timestamp, h.Marker = 2, uint16(i), uint32(i)*960, true
			p := audio
			if j%2 == 1 {
				p = video
			}
			if err := t.write(h, p); err != nil {
				failed++
			} else {
				sent++
			}
		}
		if batched {
			s.eng.release()
		}
		next = next.Add(2 * time.Millisecond)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
	}
	b.StopTimer()
	cpu := threadCPU() - cpu0
	b.ReportMetric(float64(sent)/cpu.Seconds(), "pkts/core-s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(max(1, sent)), "cpu-ns/pkt")
	if failed > 0 {
		b.ReportMetric(float64(failed), "failed")
	}
}

// threadCPU returns the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// newReceiver returns a pion connection configured like the benchmark's
// load clients (rtctest): NACKs, receiver reports and TWCC feedback.
func newReceiver() (*webrtc.PeerConnection, error) {
	m := &webrtc.MediaEngine{}
	if err := m.RegisterDefaultCodecs(); err != nil {
		return nil, err
	}
	reg := &interceptor.Registry{}
	if err := webrtc.ConfigureNack(m, reg); err != nil {
		return nil, err
	}
	if err := webrtc.ConfigureRTCPReports(reg); err != nil {
		return nil, err
	}
	if err := webrtc.ConfigureTWCCSender(m, reg); err != nil {
		return nil, err
	}
	se := webrtc.SettingEngine{}
	se.SetIncludeLoopbackCandidate(true)
	if err := se.SetAnsweringDTLSRole(webrtc.DTLSRoleClient); err != nil { // as a browser answers
		return nil, err
	}
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	se.SetInterfaceFilter(func(s string) bool { return s == "lo" })
	pc, err := webrtc.NewAPI(webrtc.WithMediaEngine(m), webrtc.WithInterceptorRegistry(reg), webrtc.WithSettingEngine(se)).
		NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return nil, err
	}
	pc.OnTrack(func(t *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		buf := make([]byte, 1500)
		for {
			if _, _, err := t.Read(buf); err != nil {
				return
			}
		}
	})
	return pc, nil
}

// connect negotiates tx (the node's side, offering) with rx and waits
// until it is connected.
func connect(tx, rx *webrtc.PeerConnection) error {
	up := make(chan struct{})
	tx.OnConnectionStateChange(func(s webrtc.PeerConnectionState) {
		if s == webrtc.PeerConnectionStateConnected {
			close(up)
		}
	})
	offer, err := tx.CreateOffer(nil)
	if err != nil {
		return err
	}
	done := webrtc.GatheringCompletePromise(tx)
	if err := tx.SetLocalDescription(offer); err != nil {
		return err
	}
	<-done
	if err := rx.SetRemoteDescription(*tx.LocalDescription()); err != nil {
		return err
	}
	answer, err := rx.CreateAnswer(nil)
	if err != nil {
		return err
	}
	done = webrtc.GatheringCompletePromise(rx)
	if err := rx.SetLocalDescription(answer); err != nil {
		return err
	}
	<-done
	if err := tx.SetRemoteDescription(*rx.LocalDescription()); err != nil {
		return err
	}
	select {
	case <-up:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("not connected")
	}
}
