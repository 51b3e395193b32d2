package mediabench

import (
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// LoopbackLimit is the machine's loopback TCP throughput, in MB/s: one
// connection per CPU, each a writer of 256 KiB blocks and a reader, for
// d. No HTTP server on this machine serves viewers faster than this.
func LoopbackLimit(d time.Duration) float64 {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	var total atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	n := runtime.NumCPU()
	go func() {
		for range n {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				buf := make([]byte, 256<<10)
				for {
					k, err := c.Read(buf)
					total.Add(int64(k))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			return 0
		}
		conns = append(conns, c)
		go func() {
			buf := make([]byte, 256<<10)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond) // the connections under way
	t0, b0 := time.Now(), total.Load()
	time.Sleep(d)
	mb := float64(total.Load()-b0) / 1e6 / time.Since(t0).Seconds()
	close(stop)
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
	return mb
}
