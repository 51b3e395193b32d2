-- 0016_media_services: the HLS streams and video composites started
-- through the API (issue 16, failover), so that the session's owner starts
-- again what a dead node ran. kind is 'hls' (id: the session's ID, one
-- stream a session) or 'composite' (id: the composite's). request is what
-- was asked (JSON: hls.StartOptions, composite.Request); node_id the node
-- running it now ('' when nobody does: its node restarted), the fencing
-- token of a move: a survivor updates the row only where node_id is still
-- what it read. member is the session member that publishes its picture
-- (the composite's, an HLS stream's own composite's; '' for none), for the
-- survivor to remove. 0015 is another branch's; migrations may skip a
-- number (loadMigrations orders them by version).

CREATE TABLE media_services (
    kind       TEXT   NOT NULL,
    id         TEXT   NOT NULL,
    session_id TEXT   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    request    TEXT   NOT NULL,
    node_id    TEXT   NOT NULL,
    member     TEXT   NOT NULL DEFAULT '',
    started_by TEXT   NOT NULL,
    started_at BIGINT NOT NULL,
    PRIMARY KEY (kind, id)
);

CREATE INDEX media_services_session_idx ON media_services (session_id);
