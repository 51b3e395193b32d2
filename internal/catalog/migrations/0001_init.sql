-- 0001_init: sessions and their media links.
-- Portable SQL only (runs on SQLite and PostgreSQL): TEXT/BIGINT/INTEGER,
-- timestamps are BIGINT unix milliseconds UTC, booleans are INTEGER 0/1.

CREATE TABLE sessions (
    id         TEXT    NOT NULL PRIMARY KEY,
    name       TEXT    NOT NULL,
    state      TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    start_at   BIGINT,
    end_at     BIGINT,
    updated_at BIGINT  NOT NULL
);

CREATE INDEX sessions_created_at_idx ON sessions (created_at, id);

CREATE TABLE links (
    id          TEXT    NOT NULL PRIMARY KEY,
    session_id  TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    link_type   TEXT    NOT NULL,
    media_kind  TEXT    NOT NULL,
    direction   TEXT    NOT NULL,
    remote      TEXT    NOT NULL,
    remote_rtcp TEXT    NOT NULL DEFAULT '',
    rtcp_mux    INTEGER NOT NULL DEFAULT 0,
    ttl         INTEGER NOT NULL DEFAULT 0,
    iface       TEXT    NOT NULL DEFAULT '',
    created_at  BIGINT  NOT NULL
);

CREATE INDEX links_session_idx ON links (session_id, created_at, id);
