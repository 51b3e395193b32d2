// Package netnstest runs a test inside a fresh network namespace in which
// multicast works on lo (tests of the multicast bridge and of sessions with
// multicast links), and can delay and lose that namespace's loopback
// packets with netem (tests of ordering under delay and loss). It is
// imported only by tests.
package netnstest
