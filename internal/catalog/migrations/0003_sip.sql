-- 0003_sip: SIP accounts and registrar bindings.
-- Passwords are never stored: only the HA1 digests (RFC 7616 / RFC 8760)
-- H(username ":" realm ":" password) for MD5 and SHA-256, hex encoded.

CREATE TABLE sip_users (
    username   TEXT    NOT NULL PRIMARY KEY,
    realm      TEXT    NOT NULL,
    ha1_md5    TEXT    NOT NULL,
    ha1_sha256 TEXT    NOT NULL,
    created_at BIGINT  NOT NULL
);

-- One row per registered contact of a user (RFC 3261 section 10.3).
-- source is "transport/ip:port" the REGISTER came from, used instead of
-- the Contact's own address for clients behind NAT (RFC 3581).
CREATE TABLE sip_bindings (
    username   TEXT    NOT NULL REFERENCES sip_users (username) ON DELETE CASCADE,
    contact    TEXT    NOT NULL,
    call_id    TEXT    NOT NULL,
    cseq       BIGINT  NOT NULL,
    expires_at BIGINT  NOT NULL,
    source     TEXT    NOT NULL DEFAULT '',
    nat        INTEGER NOT NULL DEFAULT 0,
    user_agent TEXT    NOT NULL DEFAULT '',
    updated_at BIGINT  NOT NULL,
    PRIMARY KEY (username, contact)
);

CREATE INDEX sip_bindings_expires_idx ON sip_bindings (expires_at);
