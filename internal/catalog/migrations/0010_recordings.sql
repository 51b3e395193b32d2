-- 0010_recordings: recordings of sessions (issue 15). A recording outlives
-- its session (no foreign key: ending or deleting a session keeps its
-- recordings); owner is "operator" or the member ID of the chair who
-- started it; dir is the recording's directory on the node that wrote it.
-- Times are BIGINT unix milliseconds UTC, ended_at NULL while recording.

CREATE TABLE recordings (
    id          TEXT   NOT NULL PRIMARY KEY,
    session_id  TEXT   NOT NULL,
    title       TEXT   NOT NULL DEFAULT '',
    description TEXT   NOT NULL DEFAULT '',
    owner       TEXT   NOT NULL,
    state       TEXT   NOT NULL,
    started_at  BIGINT NOT NULL,
    ended_at    BIGINT,
    duration_ms BIGINT NOT NULL DEFAULT 0,
    size_bytes  BIGINT NOT NULL DEFAULT 0,
    streams     INTEGER NOT NULL DEFAULT 0,
    dir         TEXT   NOT NULL,
    error       TEXT   NOT NULL DEFAULT ''
);

CREATE INDEX recordings_session_idx ON recordings (session_id, started_at, id);
CREATE INDEX recordings_owner_idx ON recordings (owner);
CREATE INDEX recordings_started_idx ON recordings (started_at, id);
