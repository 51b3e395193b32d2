//go:build linux

package multicast

import (
	"testing"

	"github.com/convene/convene/internal/netnstest"
)

// inNetns runs the calling top-level test inside a fresh network namespace
// in which multicast works on lo (netnstest.Enter): false in the parent
// after the child has run, true in the child.
func inNetns(t *testing.T) bool { return netnstest.Enter(t) }
