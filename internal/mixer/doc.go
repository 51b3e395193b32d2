// Package mixer mixes a session's audio for the endpoints that cannot mix
// for themselves: SIP phones and plain RTP endpoints that ask for a mix.
// It is the media service of the seed's global-mmcs paper, in process.
//
// A Mixer serves one subgroup of one session's room. It joins the room as
// a receiving member, so floor gates and subgroups apply to it as to any
// receiver: a member without the floor is not in the mix. Each input (a
// track of the group) is decoded, put through a jitter buffer with loss
// concealment and resampled to the mixing rate (the highest any input or
// output needs: 8, 16 or 48 kHz). Every 20 ms the mixer takes the loudest
// K inputs (with hysteresis) as the active speakers and sends each output
// the speakers' mix without its owner's own voice.
//
// Outputs that hear the same thing share the work: every output that is
// not among the speakers hears the same full mix, encoded once per codec
// and sent as one shared packet; only a speaker's output gets its own
// mix-minus. So a session's cost grows with K, not with its members.
//
// Service keeps the mixers of the node, makes one on demand when the first
// output of a group attaches, stops it when the last leaves, and refuses a
// new mixer when the node's mixing capacity is used up.
package mixer
