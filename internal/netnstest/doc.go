// Package netnstest runs a test inside a fresh network namespace in which
// multicast works on lo (tests of the multicast bridge and of sessions with
// multicast links). It is imported only by tests.
package netnstest
