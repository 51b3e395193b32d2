-- 0015_sip_calls: the calls phones made into sessions, so that another
-- node can take one over when the node that answered it dies (issue 16,
-- failover): the session's owner re-INVITEs the phone with its own media
-- addresses. node_id is the node that serves the call now, the fencing
-- token of a move (a survivor takes a call over only where node_id is
-- still the dead node it read); dialog is what re-INVITE needs, as JSON
-- (tags, the phone's Contact and address, its SDP offer; sip.Dialog).

CREATE TABLE sip_calls (
    call_id    TEXT   NOT NULL PRIMARY KEY,
    session_id TEXT   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    member_id  TEXT   NOT NULL,
    node_id    TEXT   NOT NULL,
    dialog     TEXT   NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE INDEX sip_calls_session_idx ON sip_calls (session_id);
