package rtctest

import "github.com/pion/interceptor"

// streamAttrs is the outermost interceptor of a client's receive chain:
// it hands the chain one Attributes map per remote stream, cleared before
// each read. pion's TrackRemote reads with none, and the receiver-report,
// NACK and transport-wide CC interceptors each then make a map for every
// packet to keep its parsed header in: in the benchmarks' load, where a
// hundred listeners read 50,000 packets a second, those maps were a tenth
// of the load's CPU.
//
// Ownership: a stream's packets are read by one goroutine (onTrack), and
// the map it gets back with a packet is its until the next read; onTrack
// does not keep it. No interceptor of the chain keeps the map past a read.
type streamAttrs struct{ interceptor.NoOp }

func (*streamAttrs) BindRemoteStream(_ *interceptor.StreamInfo, r interceptor.RTPReader) interceptor.RTPReader {
	m := interceptor.Attributes{}
	return interceptor.RTPReaderFunc(func(b []byte, a interceptor.Attributes) (int, interceptor.Attributes, error) {
		if a == nil {
			clear(m)
			a = m
		}
		return r.Read(b, a)
	})
}

// streamAttrsFactory makes the interceptor for each connection.
type streamAttrsFactory struct{}

func (streamAttrsFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &streamAttrs{}, nil
}
