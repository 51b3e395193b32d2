package mediabench

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/convene/convene/internal/bench/convene"
	"github.com/convene/convene/internal/bench/proc"
)

// Nginx is Debian's nginx serving a directory on 127.0.0.1, run in the
// foreground (daemon off) with a configuration of its own in a scratch
// directory, stopped by its PID.
type Nginx struct {
	URL     string
	Version string
	cmd     *exec.Cmd
	stderr  *tail
}

// nginxConf serves root on 127.0.0.1:port: what a user would write for
// HLS (sendfile, keep-alive, the playlist uncached), with every path it
// writes under prefix, so it needs no root and touches nothing of the
// system's. worker_processes auto: a worker per CPU, as the node's
// goroutines use every CPU.
const nginxConf = `daemon off;
master_process on;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 16384; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	tcp_nodelay on;
	keepalive_timeout 65;
	keepalive_requests 100000;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	fastcgi_temp_path %[1]s/fastcgi;
	uwsgi_temp_path %[1]s/uwsgi;
	scgi_temp_path %[1]s/scgi;
	types { application/vnd.apple.mpegurl m3u8; video/mp2t ts; }
	server {
		listen 127.0.0.1:%[2]d;
		root %[3]s;
		location ~ \.m3u8$ { add_header Cache-Control no-cache; }
	}
}
`

// StartNginx serves root, at niceness nice (proc.Nice). Running as root, nginx's workers take the
// user nobody, so root and the directories above it must be readable by
// all (the caller's scratch directories are made so).
func StartNginx(bin, prefix, root string, nice int) (*Nginx, error) {
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, err
	}
	port := convene.FreeTCP()
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(nginxConf, prefix, port, root)), 0o644); err != nil {
		return nil, err
	}
	ng := &Nginx{URL: "http://127.0.0.1:" + strconv.Itoa(port), stderr: &tail{max: 4096}}
	if out, err := exec.Command(bin, "-v").CombinedOutput(); err == nil {
		ng.Version = strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: ")
	}
	ng.cmd = exec.Command(bin, "-p", prefix, "-c", conf, "-e", filepath.Join(prefix, "error.log"))
	ng.cmd.Stdout, ng.cmd.Stderr = ng.stderr, ng.stderr
	proc.Nice(ng.cmd, nice)
	if err := ng.cmd.Start(); err != nil {
		return nil, err
	}
	for range 50 {
		if resp, err := http.Get(ng.URL + "/"); err == nil {
			resp.Body.Close()
			return ng, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	ng.Stop()
	b, _ := os.ReadFile(filepath.Join(prefix, "error.log"))
	return nil, fmt.Errorf("nginx did not start: %s %s", ng.stderr, b)
}

// PID is the master's; its workers are its children (proc.TreeCPU).
func (ng *Nginx) PID() int { return ng.cmd.Process.Pid }

// Stop stops the master (SIGTERM: a fast shutdown, the workers with it).
func (ng *Nginx) Stop() { proc.Stop(ng.cmd, 5*time.Second) }
