-- 0002_sessions: session members, subgroups, and which member a link is for.
-- Sessions already carry start_at/end_at (0001) for scheduling.

CREATE TABLE subgroups (
    id         TEXT   NOT NULL PRIMARY KEY,
    session_id TEXT   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name       TEXT   NOT NULL,
    created_by TEXT   NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
);

CREATE INDEX subgroups_session_idx ON subgroups (session_id, created_at, id);

CREATE TABLE members (
    id         TEXT   NOT NULL PRIMARY KEY,
    session_id TEXT   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name       TEXT   NOT NULL,
    role       TEXT   NOT NULL,
    subgroup   TEXT   NOT NULL DEFAULT '',
    joined_at  BIGINT NOT NULL
);

CREATE INDEX members_session_idx ON members (session_id, joined_at, id);

CREATE TABLE member_links (
    link_id   TEXT NOT NULL PRIMARY KEY REFERENCES links (id) ON DELETE CASCADE,
    member_id TEXT NOT NULL REFERENCES members (id) ON DELETE CASCADE
);

CREATE INDEX member_links_member_idx ON member_links (member_id);
