// Package probe carries the source of the machine probe, probe.c: a minimal
// C program that measures this machine's loopback UDP fan-out limit (see the
// comment at the top of probe.c). The source is embedded so that a convene
// binary can build the probe wherever it runs, without the repository.
package probe

import _ "embed"

// Source is the text of probe.c.
//
//go:embed probe.c
var Source []byte
