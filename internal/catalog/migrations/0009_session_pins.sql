-- 0009_session_pins: a session's dial-in PIN for guests (issue 14), kept
-- only as the digest HA1 of the user "guest" with the PIN as password, in
-- the node's SIP realm, for MD5 and SHA-256, like the accounts' passwords.

CREATE TABLE session_pins (
    session_id TEXT NOT NULL PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    ha1_md5    TEXT NOT NULL,
    ha1_sha256 TEXT NOT NULL
);
