// Package session is the session service: it creates and ends sessions,
// attaches and detaches their media links, keeps both in the catalog, opens
// the broker room that carries a session's media, and announces every change
// on the NATS bus.
//
// It is the one place that knows how the catalog, the broker, the links and
// the bus fit together; the HTTP API only translates requests into calls
// here. Every mutation is all-or-nothing: a link that cannot be stored is
// closed again, a session that cannot be stored has no room.
package session
