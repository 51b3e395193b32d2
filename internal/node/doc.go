// Package node wires one Convene node together: the catalog, the NATS bus,
// the shared media sockets, the broker, the session service and the HTTP
// API, and takes them down again in order.
//
// Start order: catalog → bus → media sockets → session service (restores
// the sessions that were active) → HTTP → heartbeat. Drain reverses it:
// HTTP stops accepting, the media of every session stops (queued packets are
// still sent), the node announces it is draining and then stopped on NATS,
// and the catalog is flushed and closed.
package node
