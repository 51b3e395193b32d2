-- 0005_join_tokens: join tokens are counted and can be revoked.
-- A join token (auth.Claims with an id) admits at most max_uses members;
-- revoked or used-up tokens are refused.

CREATE TABLE join_tokens (
    id         TEXT    NOT NULL PRIMARY KEY,
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    role       TEXT    NOT NULL,
    max_uses   INTEGER NOT NULL,
    uses       INTEGER NOT NULL DEFAULT 0,
    revoked    INTEGER NOT NULL DEFAULT 0,
    created_at BIGINT  NOT NULL,
    expires_at BIGINT  NOT NULL
);

CREATE INDEX join_tokens_session_idx ON join_tokens (session_id, created_at, id);
