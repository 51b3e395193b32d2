-- 0011_conversations: a session's conversation (issue 17) — each member's
-- number on the wire (MemberID, from 1; 0 is the node), and every message
-- the node accepted, its wire bytes base64 in body, in the order the node
-- received them (received_at, then the order of insertion within a
-- millisecond is kept by seq per sender).

CREATE TABLE conversation_members (
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    member_id  TEXT    NOT NULL,
    n          INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    PRIMARY KEY (session_id, member_id)
);

CREATE UNIQUE INDEX conversation_members_n_idx ON conversation_members (session_id, n);

CREATE TABLE conversation_messages (
    session_id  TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    sender      INTEGER NOT NULL,
    seq         BIGINT  NOT NULL,
    flow        INTEGER NOT NULL,
    sent_at     BIGINT  NOT NULL,
    received_at BIGINT  NOT NULL,
    body        TEXT    NOT NULL,
    PRIMARY KEY (session_id, sender, seq)
);

CREATE INDEX conversation_messages_order_idx ON conversation_messages (session_id, received_at);
