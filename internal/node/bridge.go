package node

import (
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/convene/convene/internal/bridge"
	"github.com/convene/convene/internal/bus"
	"github.com/convene/convene/internal/event"
	"github.com/convene/convene/internal/events"
	"github.com/convene/convene/internal/session"
)

// startBridge spans every room of the node across the cluster (package
// bridge): state on the bus's own connection, audio and video on a
// connection each, so audio never queues behind video.
func startBridge(b *bus.Bus, batch time.Duration, plug bridge.Plug, log *slog.Logger) (*bridge.Bridge, []*bridgeConn, error) {
	var conns []*nats.Conn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for _, name := range []string{"audio", "video"} {
		c, err := b.Dial(name)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		conns = append(conns, c)
	}
	audio, video := bridge.NATSMedia(conns[0]), bridge.NATSMedia(conns[1])
	br, err := bridge.New(bridge.Options{Node: b.NodeID(), Control: bridge.NATS(b.Conn()),
		Audio: audio, Video: video, Batch: batch, Plug: plug, Logger: log})
	if err != nil {
		closeAll()
		audio.Close()
		video.Close()
		return nil, nil, err
	}
	return br, []*bridgeConn{{conns[0], audio}, {conns[1], video}}, nil
}

// bridgeConn is a media connection of the bridge and its queues.
type bridgeConn struct {
	nc *nats.Conn
	mc *bridge.MediaConn
}

// close closes the connection, then stops its queues.
func (c *bridgeConn) close() {
	c.nc.Close()
	c.mc.Close()
}

// clusterCollector reads the bridge's and the leases' counters when
// /metrics is scraped. Metrics:
//
//	convene_bridge_packets_total{direction}   packets sent to (out) and received from (in) other nodes
//	convene_bridge_bytes_total{direction}     their messages' bytes, envelopes included
//	convene_bridge_messages_total{direction}  the media messages (batches) that carried them
//	convene_bridge_dropped_total              packets dropped: a full queue, a failed publish, a bad message
//	convene_bridge_tracks{state}              other nodes' tracks in this node's rooms (remote), those
//	                                          pulled here, and this node's tracks pushed to others
//	convene_session_leases_lost_total         sessions this node stopped owning (lease not renewed or taken over)
type clusterCollector struct {
	br  *bridge.Bridge
	svc *session.Service

	packets, bytes, messages, dropped, tracks, lost *prometheus.Desc
}

func newClusterCollector(br *bridge.Bridge, svc *session.Service) *clusterCollector {
	return &clusterCollector{br: br, svc: svc,
		packets:  prometheus.NewDesc("convene_bridge_packets_total", "Media packets sent to (out) and received from (in) other nodes.", []string{"direction"}, nil),
		bytes:    prometheus.NewDesc("convene_bridge_bytes_total", "Bytes of media messages to and from other nodes, envelope included.", []string{"direction"}, nil),
		messages: prometheus.NewDesc("convene_bridge_messages_total", "Media messages (batches of packets) sent to (out) and received from (in) other nodes.", []string{"direction"}, nil),
		dropped:  prometheus.NewDesc("convene_bridge_dropped_total", "Bridged packets dropped (full queue, failed publish, malformed message).", nil, nil),
		tracks:   prometheus.NewDesc("convene_bridge_tracks", "Other nodes' tracks in this node's rooms (remote), pulled here (pulled), and this node's tracks sent to others (pushed).", []string{"state"}, nil),
		lost:     prometheus.NewDesc("convene_session_leases_lost_total", "Sessions this node stopped owning: lease not renewed in time or taken over.", nil, nil),
	}
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.packets, c.bytes, c.messages, c.dropped, c.tracks, c.lost} {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.br.Stats()
	counter := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	gauge := func(d *prometheus.Desc, v int, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), l...)
	}
	counter(c.packets, st.PacketsOut, "out")
	counter(c.packets, st.PacketsIn, "in")
	counter(c.bytes, st.BytesOut, "out")
	counter(c.bytes, st.BytesIn, "in")
	counter(c.messages, st.BatchesOut, "out")
	counter(c.messages, st.BatchesIn, "in")
	counter(c.dropped, st.Dropped)
	gauge(c.tracks, st.RemoteTracks, "remote")
	gauge(c.tracks, st.Pulled, "pulled")
	gauge(c.tracks, st.Pushed, "pushed")
	counter(c.lost, c.svc.LostLeases())
}

// nodeLocal are the session events about this node alone: another
// node's shedding is not news to the members here (their video is not
// paused).
var nodeLocal = map[string]bool{event.LoadShed.String(): true}

// watchSessions takes in the session events other nodes announce
// (convene.session.<id>.<type>): each joins this node's stream of its
// session (events.Hub.Remote), so a member's web app sees the session's
// changes whichever node made them; a floor event also tells the session
// service, so a node that does not own a session gates its tracks by the
// owner's floors without waiting for the next lease round
// (session.Service.FloorsChanged).
func watchSessions(b *bus.Bus, svc *session.Service, hub *events.Hub) (*nats.Subscription, error) {
	return b.Conn().Subscribe(bus.SessionPrefix+".>", func(m *nats.Msg) {
		var ev struct {
			Type      string          `json:"type"`
			NodeID    string          `json:"node_id"`
			SessionID string          `json:"session_id"`
			Time      time.Time       `json:"time"`
			Data      json.RawMessage `json:"data"`
		}
		if json.Unmarshal(m.Data, &ev) != nil || ev.NodeID == b.NodeID() || ev.NodeID == "" || ev.SessionID == "" ||
			m.Subject != bus.SessionPrefix+"."+ev.SessionID+"."+ev.Type {
			return
		}
		if strings.HasPrefix(ev.Type, "floor.") {
			svc.FloorsChanged(ev.SessionID)
		}
		if !nodeLocal[ev.Type] {
			hub.Remote(events.Event{SessionID: ev.SessionID, Type: ev.Type, Time: ev.Time, Data: ev.Data, Node: ev.NodeID})
		}
	})
}
