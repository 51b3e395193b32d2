// Package capacity keeps a node inside what it can deliver. It knows the
// node's delivery capacity in packets/s sent (configured, or measured: a
// self-probe at start-up, then the process's CPU time per packet sent,
// corrected as it runs, and held where the load stands while the node's
// own send queues hold packets too long) and its load (packets/s sent
// now); it admits a new join, link or mixer only if its predicted packets
// keep the load under capacity × (1 − headroom), and when the load passes
// the capacity anyway it raises a shed level that the media paths read —
// simulcast layers above the lowest, then video of non-speakers, then all
// video; audio is never shed — and lowers it again, with hysteresis, when
// the load falls.
//
// It imports nothing of ours: the node hands it counters (packets sent,
// CPU seconds) and hears its level changes through a callback.
package capacity
