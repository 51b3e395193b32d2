// Package api is Convene's HTTP interface: the REST API under /api/v1, its
// OpenAPI document, /healthz and /metrics.
//
// Handlers decode and check a request, call the session service, and write
// JSON. Errors are JSON too, {"error": {"code": ..., "message": ...}}, with
// a 4xx status that says whose fault it was: 400 for a bad body, 404 for an
// unknown session or link, 409 for a conflict with the current state, 413
// for a body over 64 KiB, 503 while the node drains.
package api
