// Package recording is the node's recording service: it starts and stops
// a recorder.Recording of a session's room on request, keeps every
// recording in the catalog (title, description, owner, state, start, end,
// duration, size, streams) and under <root>/<id>/ on disk, and lets them
// be listed, read, renamed and deleted.
//
// A recording ends when it is stopped, when its session leaves the
// activated state (SessionEnded), when the node drains (Close) or when a
// write fails (the recorder stops by itself); one goroutine per recording
// waits for its end and stores it. At start-up New repairs the recordings
// the process died in (recorder.Repair) and marks them interrupted.
//
// Admission: the service knows how many bits per second the node's disk
// can take for recordings (Options.Capacity: measured by ProbeDisk at
// start-up, or configured). A recording reserves an estimate of its
// session's media when it starts — 128 kb/s for each audio track and
// 2.5 Mb/s for each video track the room has then, one audio track at
// least — and one that would take the reservations past the capacity is
// refused (ErrCapacity). Tracks that join later are recorded but not
// reserved for. An owner whose recordings already take Options.Quota bytes
// or more starts no new one (ErrQuota); a running recording is not cut
// when it passes the quota.
//
// Lock order: the session service's lock (it calls Note and SessionEnded
// from its event publisher), then Service.mu, then recorder.Recording's.
// Service.mu is never held while calling the session service, the catalog
// or the disk.
package recording
