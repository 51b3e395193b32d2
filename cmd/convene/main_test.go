package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(nil, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "usage") {
		t.Errorf("no args: %d %q", code, errb.String())
	}
	if code := run([]string{"frobnicate"}, nil, &out, &errb); code != 2 {
		t.Errorf("unknown command: %d", code)
	}
	out.Reset()
	if code := run([]string{"serve", "-h"}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "-http-addr") {
		t.Errorf("serve -h: %d %q", code, out.String())
	}
	if code := run([]string{"serve", "-rtp-port", "x"}, nil, &out, &errb); code != 2 {
		t.Errorf("bad flag: %d", code)
	}
	if code := run([]string{"serve"}, []string{"CONVENE_NOPE=1"}, &out, &errb); code != 2 {
		t.Errorf("unknown env: %d", code)
	}
}

// TestServeAndDrain builds the real binary, starts it with the sample
// config on random ports, checks it answers, and stops it with SIGTERM: it
// must drain and exit 0.
func TestServeAndDrain(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "convene")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	data := t.TempDir()
	cmd := exec.Command(bin, "serve", "-config", "../../config/convene.sample.yaml",
		"-http-addr", "127.0.0.1:0", "-rtp-port", "0", "-sip-listen", "127.0.0.1:0", "-webrtc-udp-port", "0", "-data-dir", data)
	cmd.Env = append(os.Environ(), "CONVENE_LOG_LEVEL=debug", "CONVENE_AUTH_API_KEYS=main-test-key")
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no URL printed: %v\n%s", err, stderr.String())
	}
	url := regexp.MustCompile(`http://[0-9.:]+`).FindString(line)
	if url == "" {
		t.Fatalf("no URL in %q", line)
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("POST", url+"/api/v1/sessions", strings.NewReader(`{"name":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", "main-test-key")
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create session: %v %v", err, resp)
	}
	resp.Body.Close()

	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("did not exit after SIGTERM\n%s", stderr.String())
	}
	for _, want := range []string{"node draining", "node stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(data, "convene.db")); err != nil {
		t.Errorf("catalog not in data dir: %v", err)
	}
}
