-- 0012_session_owners: which node owns each session (issue 16). The owner
-- holds the session's floor controller and scheduler; it renews its lease
-- every few seconds, and another node may take the session once the lease
-- has expired, incrementing epoch: the fencing token every owner write
-- checks. link_nodes says on which node a stored link's media runs, so a
-- node restores only its own.

CREATE TABLE session_owners (
    session_id TEXT   NOT NULL PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    node_id    TEXT   NOT NULL,
    epoch      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

CREATE TABLE link_nodes (
    link_id TEXT NOT NULL PRIMARY KEY REFERENCES links (id) ON DELETE CASCADE,
    node_id TEXT NOT NULL
);
