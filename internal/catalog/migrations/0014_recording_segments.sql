-- 0014_recording_segments: a recording outlives the node that writes it
-- (issue 16, failover). node_id is the node writing the recording now
-- ('' on a lone node, or when nobody does: its node crashed and restarted);
-- segment is the number of its current segment, the fencing token of a
-- move: a survivor that takes a recording over updates the row only where
-- node_id and segment are still what it read. Each node's part of a
-- recording is one row of recording_segments, with its own directory on
-- that node's disk; the recording's dir stays its first segment's.

ALTER TABLE recordings ADD COLUMN node_id TEXT NOT NULL DEFAULT '';
ALTER TABLE recordings ADD COLUMN segment INTEGER NOT NULL DEFAULT 1;

CREATE TABLE recording_segments (
    recording_id TEXT    NOT NULL REFERENCES recordings (id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    node_id      TEXT    NOT NULL,
    dir          TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    started_at   BIGINT  NOT NULL,
    ended_at     BIGINT,
    size_bytes   BIGINT  NOT NULL DEFAULT 0,
    streams      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (recording_id, seq)
);

INSERT INTO recording_segments (recording_id, seq, node_id, dir, state, started_at, ended_at, size_bytes, streams)
SELECT id, 1, '', dir, state, started_at, ended_at, size_bytes, streams FROM recordings;

-- Every failover round looks for running recordings (by state).
CREATE INDEX recordings_state_idx ON recordings (state, session_id);
