package supervise

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/convene/convene/internal/bus"
)

// Status is what a service reports about itself.
type Status struct {
	Kind    string `json:"kind"`              // "mixer", "transcoder"
	ID      string `json:"id"`                // unique on the node
	Session string `json:"session,omitempty"` // the session it serves
	// Beats advances while the service works; a service whose beats stop
	// is restarted.
	Beats uint64 `json:"beats"`
	// Load is the CPU the service uses, in cores, as it measures it.
	Load    float64 `json:"load_cores"`
	Inputs  int     `json:"inputs"`
	Outputs int     `json:"outputs"`
}

// Report is one message on NATS: every service of a node at one time.
type Report struct {
	Services []Status `json:"services"`
}

// Options configure a Supervisor.
type Options struct {
	// Bus carries the reports; nil keeps them in the process (tests, and
	// a node without a control plane).
	Bus *bus.Bus
	// Interval between reports; 250 ms.
	Interval time.Duration
	// Stale is how long a service's beats may stand still before it is
	// restarted; 1 s.
	Stale   time.Duration
	Metrics *Metrics
	Logger  *slog.Logger
}

// Supervisor reports the node's services and restarts those that stop.
type Supervisor struct {
	o   Options
	sub *nats.Subscription

	mu    sync.Mutex
	svcs  map[string]*entry
	loads map[string]float64 // by kind, from the last report

	stop, done chan struct{}
}

type entry struct {
	status  func() Status
	restart func()
	kind    string
	beats   uint64
	movedAt time.Time // when beats last advanced (or it was (re)started)
	judged  bool      // a report has shown its beats
}

// New starts a supervisor. Close stops it.
func New(o Options) (*Supervisor, error) {
	if o.Interval <= 0 {
		o.Interval = 250 * time.Millisecond
	}
	if o.Stale <= 0 {
		o.Stale = time.Second
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Supervisor{o: o, svcs: map[string]*entry{}, loads: map[string]float64{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if o.Bus != nil {
		subject, err := bus.NodeSubject(o.Bus.NodeID(), bus.EventServices)
		if err != nil {
			return nil, err
		}
		if s.sub, err = o.Bus.Conn().Subscribe(subject, s.onMessage); err != nil {
			return nil, fmt.Errorf("supervise: subscribe %s: %w", subject, err)
		}
	}
	go s.run()
	return s, nil
}

// Add registers a service: status is called every Interval and must be
// cheap and never block; restart is called (on its own goroutine) when
// the service's beats stop. Remove the service with the returned func.
func (s *Supervisor) Add(kind, id string, status func() Status, restart func()) (remove func()) {
	s.mu.Lock()
	e := &entry{status: status, restart: restart, kind: kind, movedAt: time.Now()}
	s.svcs[id] = e
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.svcs[id] == e {
			delete(s.svcs, id)
		}
		s.mu.Unlock()
	}
}

// Load is the measured CPU of the node's services of kind, in cores, and
// how many there are, as of the last report.
func (s *Supervisor) Load(kind string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loads[kind]
}

// Close stops reporting and supervising.
func (s *Supervisor) Close() {
	select {
	case <-s.stop:
		return
	default:
	}
	close(s.stop)
	<-s.done
	if s.sub != nil {
		_ = s.sub.Unsubscribe()
	}
}

func (s *Supervisor) run() {
	defer close(s.done)
	t := time.NewTicker(s.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.publish()
		case <-s.stop:
			return
		}
	}
}

// publish reports every service's status.
func (s *Supervisor) publish() {
	s.mu.Lock()
	fns := make([]func() Status, 0, len(s.svcs))
	for _, e := range s.svcs {
		fns = append(fns, e.status)
	}
	s.mu.Unlock()
	r := Report{Services: make([]Status, 0, len(fns))}
	for _, f := range fns {
		r.Services = append(r.Services, f())
	}
	sort.Slice(r.Services, func(i, j int) bool { return r.Services[i].ID < r.Services[j].ID })
	if s.o.Bus == nil {
		s.judge(r, time.Now())
		return
	}
	if err := s.o.Bus.NodeEvent(bus.EventServices, r); err != nil {
		s.o.Metrics.reportErrors.Inc()
		s.o.Logger.Warn("services report", "err", err)
	}
}

func (s *Supervisor) onMessage(msg *nats.Msg) {
	var ev struct {
		Data Report `json:"data"`
	}
	if err := json.Unmarshal(msg.Data, &ev); err != nil {
		s.o.Metrics.reportErrors.Inc()
		s.o.Logger.Warn("services report: undecodable", "err", err)
		return
	}
	s.judge(ev.Data, time.Now())
}

// judge updates the loads and restarts the services whose beats have
// stood still for Stale.
func (s *Supervisor) judge(r Report, now time.Time) {
	loads := map[string]float64{}
	counts := map[string]int{}
	var dead []*entry
	var ids []string
	s.mu.Lock()
	for _, st := range r.Services {
		loads[st.Kind] += st.Load
		counts[st.Kind]++
		e := s.svcs[st.ID]
		if e == nil {
			continue
		}
		if !e.judged || st.Beats != e.beats {
			e.beats, e.movedAt, e.judged = st.Beats, now, true
			continue
		}
		if now.Sub(e.movedAt) >= s.o.Stale {
			e.movedAt, e.judged = now, false // a grace period for the restart
			dead = append(dead, e)
			ids = append(ids, st.ID)
		}
	}
	s.loads = loads
	s.mu.Unlock()
	s.o.Metrics.set(loads, counts)
	for i, e := range dead {
		s.o.Metrics.restarts.WithLabelValues(e.kind).Inc()
		s.o.Logger.Warn("media service stopped reporting; restarting it", "kind", e.kind, "id", ids[i])
		go e.restart()
	}
}

// Metrics are the supervisor's Prometheus collectors.
type Metrics struct {
	restarts     *prometheus.CounterVec
	load         *prometheus.GaugeVec
	services     *prometheus.GaugeVec
	reportErrors prometheus.Counter

	mu    sync.Mutex
	kinds map[string]bool
}

// NewMetrics makes the collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "convene_service_restarts_total",
			Help: "Media services restarted because they stopped reporting, by kind."}, []string{"kind"}),
		load: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "convene_service_load_cores",
			Help: "CPU the node's media services use, as they measure it, in cores, by kind."}, []string{"kind"}),
		services: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "convene_services",
			Help: "Media services reporting, by kind."}, []string{"kind"}),
		reportErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "convene_service_report_errors_total",
			Help: "Service reports that could not be published or decoded."}),
		kinds: map[string]bool{},
	}
}

// RestartsOf is the restart counter of a kind.
func (m *Metrics) RestartsOf(kind string) prometheus.Counter { return m.restarts.WithLabelValues(kind) }

// Register adds the collectors to r.
func (m *Metrics) Register(r prometheus.Registerer) {
	r.MustRegister(m.restarts, m.load, m.services, m.reportErrors)
}

func (m *Metrics) set(loads map[string]float64, counts map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range counts {
		m.kinds[k] = true
	}
	for k := range m.kinds {
		m.load.WithLabelValues(k).Set(loads[k])
		m.services.WithLabelValues(k).Set(float64(counts[k]))
	}
}
