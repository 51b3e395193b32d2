// Package supervise keeps the node's media services alive: the seed's
// "restart it or locate a new service provider".
//
// A media service (a session's mixer, a transcoder) registers with the
// Supervisor and exposes a Status whose Beats counter advances while it
// works (a mixer counts its 20 ms ticks). Every Interval the supervisor
// reports every service's status and measured load in one message on
// NATS (convene.node.<node>.services), and it judges liveness from those
// reports as they come back: a service whose beats did not advance for
// Stale is restarted through the function it registered with. Liveness
// is judged only from reports that arrived, so a NATS outage restarts
// nothing; it only delays the judgement.
//
// The reported loads are what admission uses: Load(kind) is the measured
// CPU the node's services of a kind use, in cores, from the last report.
package supervise
