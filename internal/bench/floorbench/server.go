package floorbench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"time"

	"github.com/convene/convene/internal/auth"

	"github.com/convene/convene/internal/bench/proc"
)

// server is a `convene serve` child process.
type server struct {
	cmd    *exec.Cmd
	url    string
	key    string
	client *http.Client
	stderr bytes.Buffer
}

func startServer(bin, dir string) (*server, error) {
	s := &server{key: auth.RandomHex(16), client: &http.Client{Timeout: 10 * time.Second}}
	// Every port picked free (SIP too), so another node or benchmark on the
	// machine does not stop this one from starting.
	s.cmd = exec.Command(bin, "serve", "-http-addr", "127.0.0.1:0", "-rtp-port", "0", "-sip-listen", "127.0.0.1:0", "-webrtc-enabled=false",
		"-data-dir", dir, "-log-level", "warn")
	s.cmd.Env = append(os.Environ(), "CONVENE_AUTH_API_KEYS="+s.key)
	s.cmd.Stderr = &s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("convene did not start: %v: %s", err, s.stderr.String())
	}
	s.url = regexp.MustCompile(`http://[0-9.:]+`).FindString(line)
	if s.url == "" {
		s.stop()
		return nil, fmt.Errorf("convene printed %q", line)
	}
	go io.Copy(io.Discard, out)
	return s, nil
}

func (s *server) stop() { proc.Stop(s.cmd, 15*time.Second) }

// call does one JSON request with the given credential.
func (s *server) call(method, path, cred string, body, out any, want int) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}
