package ng

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// Client sends ng requests to one relay (Convene or rtpengine) and waits for
// each reply, retrying on timeout. It is safe for concurrent use, one
// request at a time.
type Client struct {
	mu      sync.Mutex
	conn    *net.UDPConn
	seq     uint64
	Timeout time.Duration // per attempt (default 1s); 3 attempts
	buf     []byte
}

// Dial connects a client to the relay's ng address (host:port).
func Dial(addr string) (*Client, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	conn, err := net.DialUDP("udp", nil, ua)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, Timeout: time.Second, buf: make([]byte, MaxMessage)}, nil
}

// Close closes the client's socket.
func (c *Client) Close() error { return c.conn.Close() }

// Do sends req and returns the reply dictionary; a reply with result
// "error" is returned as an error.
func (c *Client) Do(req map[string]any) (map[string]any, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	cookie := strconv.FormatUint(c.seq, 10) + "_" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	msg, err := AppendMessage(nil, cookie, req)
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 3; attempt++ {
		if _, err := c.conn.Write(msg); err != nil {
			return nil, err
		}
		deadline := time.Now().Add(c.Timeout)
		for {
			_ = c.conn.SetReadDeadline(deadline)
			n, err := c.conn.Read(c.buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break
				}
				return nil, err
			}
			ck, resp, err := ParseMessage(c.buf[:n])
			if ck != cookie {
				continue // a late reply to an earlier attempt
			}
			if err != nil {
				return nil, err
			}
			if str(resp, "result") == "error" {
				return resp, fmt.Errorf("ng %v: %s", req["command"], str(resp, "error-reason"))
			}
			return resp, nil
		}
	}
	return nil, fmt.Errorf("ng %v: no reply after 3 attempts", req["command"])
}

// Ping checks that the relay answers.
func (c *Client) Ping() error {
	resp, err := c.Do(map[string]any{"command": "ping"})
	if err != nil {
		return err
	}
	if r := str(resp, "result"); r != "pong" {
		return fmt.Errorf("ng ping: result %q", r)
	}
	return nil
}

// Offer sends an offer and returns the rewritten SDP.
func (c *Client) Offer(callID, fromTag string, sdp []byte, extra map[string]any) ([]byte, error) {
	req := map[string]any{"command": "offer", "call-id": callID, "from-tag": fromTag, "sdp": sdp}
	for k, v := range extra {
		req[k] = v
	}
	return c.sdp(req)
}

// Answer sends an answer and returns the rewritten SDP.
func (c *Client) Answer(callID, fromTag, toTag string, sdp []byte, extra map[string]any) ([]byte, error) {
	req := map[string]any{"command": "answer", "call-id": callID, "from-tag": fromTag, "to-tag": toTag, "sdp": sdp}
	for k, v := range extra {
		req[k] = v
	}
	return c.sdp(req)
}

// Delete ends a call.
func (c *Client) Delete(callID string) error {
	_, err := c.Do(map[string]any{"command": "delete", "call-id": callID})
	return err
}

func (c *Client) sdp(req map[string]any) ([]byte, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	s, ok := resp["sdp"].(string)
	if !ok {
		return nil, fmt.Errorf("ng %v: reply has no sdp", req["command"])
	}
	return []byte(s), nil
}
