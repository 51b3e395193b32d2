package clusterbench

import (
	"encoding/json"
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
	"github.com/convene/convene/internal/testutil"
)

// Cluster is the nodes under measurement and what they stand on: routed
// nats-server processes (Debian's package), one per node, and a
// PostgreSQL catalog in a temporary directory.
type Cluster struct {
	Nodes []*convene.Node
	NATS  string // nats-server's version line

	pg   *testutil.Postgres
	nats []*exec.Cmd
}

// Start starts n nats-server processes with routes to each other, a
// PostgreSQL server and n nodes, node i attached first to server i. bin is
// the convene binary; tmp holds their files; batch is the nodes'
// nats.media_batch.
func Start(bin, tmp string, n int, batch time.Duration) (_ *Cluster, err error) {
	// c, not the named result: a failed start returns nil, and the deferred
	// Stop must still see what was started.
	c := &Cluster{}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.pg, err = testutil.StartPostgres(); err != nil {
		return nil, fmt.Errorf("postgresql: %w", err)
	}
	dsn, err := c.pg.CreateDatabase("clusterbench")
	if err != nil {
		return nil, err
	}
	urls, err := c.startNATS(tmp, n)
	if err != nil {
		return nil, err
	}
	secret := "clusterbench-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-shared-token-secret"
	for i := range n {
		// Node i's own server first: nats.go keeps the order it is given
		// when told not to randomise, and picks at random otherwise; either
		// way each node ends up on a server of the cluster.
		order := append(append([]string{}, urls[i:]...), urls[:i]...)
		node, err := convene.Start(convene.Options{Bin: bin, Tmp: tmp, Args: []string{
			"-node-id", "n" + strconv.Itoa(i+1), "-nats-url", strings.Join(order, ","),
			"-catalog-driver", "postgres", "-catalog-dsn", dsn, "-auth-token-secret", secret,
			// Admission off: this benchmark measures cost, the overload
			// benchmark measures admission.
			"-capacity-pps", "1e12", "-webrtc-enabled=false", "-nats-media-batch", batch.String()}})
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
		c.Nodes = append(c.Nodes, node)
	}
	return c, nil
}

// startNATS starts n routed servers and waits until each has a route to
// every other; it returns their client URLs.
func (c *Cluster) startNATS(tmp string, n int) ([]string, error) {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		return nil, fmt.Errorf("nats-server is not installed (scripts/install-deps.sh bench installs it)")
	}
	if out, err := exec.Command(bin, "--version").Output(); err == nil {
		c.NATS = strings.TrimSpace(string(out))
	}
	type ports struct{ client, cluster, monitor int }
	ps := make([]ports, n)
	var routes []string
	for i := range ps {
		ps[i] = ports{convene.FreeTCP(), convene.FreeTCP(), convene.FreeTCP()}
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(ps[i].cluster))
	}
	var urls []string
	for i, p := range ps {
		logf, err := os.Create(filepath.Join(tmp, fmt.Sprintf("nats-%d.log", i+1)))
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "-n", fmt.Sprintf("bench-nats-%d", i+1), "-a", "127.0.0.1", "-p", strconv.Itoa(p.client),
			"-m", strconv.Itoa(p.monitor), "--cluster_name", "convene-bench",
			"--cluster", "nats://127.0.0.1:"+strconv.Itoa(p.cluster), "--routes", strings.Join(routes, ","))
		cmd.Stdout, cmd.Stderr = logf, logf
		err = cmd.Start()
		logf.Close()
		if err != nil {
			return nil, err
		}
		c.nats = append(c.nats, cmd)
		urls = append(urls, "nats://127.0.0.1:"+strconv.Itoa(p.client))
	}
	for i, p := range ps {
		if err := waitRoutes(p.monitor, n-1, 20*time.Second); err != nil {
			return nil, fmt.Errorf("nats-server %d: %w", i+1, err)
		}
	}
	return urls, nil
}

// waitRoutes polls a server's /routez until it has want routes.
func waitRoutes(monitor, want int, d time.Duration) error {
	var last error
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(monitor) + "/routez")
		if err != nil {
			last = err
			continue
		}
		var rz struct {
			NumRoutes int `json:"num_routes"`
		}
		err = json.NewDecoder(resp.Body).Decode(&rz)
		resp.Body.Close()
		if err == nil && rz.NumRoutes >= want {
			return nil
		}
		last = fmt.Errorf("%d of %d routes", rz.NumRoutes, want)
	}
	return fmt.Errorf("routes not up: %v", last)
}

// natsCPU is each nats-server's CPU seconds so far.
func (c *Cluster) natsCPU() []float64 {
	out := make([]float64, len(c.nats))
	for i, cmd := range c.nats {
		_, out[i], _ = proc.Process(cmd.Process.Pid)
	}
	return out
}

// Stop stops the nodes, then the NATS servers and PostgreSQL.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
	for _, cmd := range c.nats {
		proc.Stop(cmd, 5*time.Second)
	}
	if c.pg != nil {
		c.pg.Stop()
	}
}
