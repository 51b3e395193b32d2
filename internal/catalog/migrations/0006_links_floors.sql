-- 0006_links_floors: which links members created (policed: destination
-- policy and consent, issue 11) and the floor state of each session, so a
-- floor-controlled session comes back controlled after a restart.

CREATE TABLE policed_links (
    link_id TEXT NOT NULL PRIMARY KEY REFERENCES links (id) ON DELETE CASCADE
);

CREATE TABLE floor_states (
    session_id TEXT   NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    floor      TEXT   NOT NULL,
    state      TEXT   NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, floor)
);
