// Package ng speaks the control protocol of rtpengine ("ng"): bencoded
// dictionaries over UDP, each datagram "<cookie> <dictionary>", the reply
// carrying the request's cookie. Server serves the subset a SIP proxy needs
// (ping, offer, answer, delete) for a Relay; Client drives any ng relay, so
// one benchmark driver measures Convene and rtpengine alike.
//
// See https://rtpengine.readthedocs.io/en/latest/ng_control_protocol.html.
package ng
