//go:build !unix

package bus

// ProcessCPUSeconds returns 0 on platforms without getrusage.
func ProcessCPUSeconds() float64 { return 0 }
