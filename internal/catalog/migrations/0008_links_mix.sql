-- 0008_links_mix: a plain RTP link may ask for the session's audio mix
-- (issue 14) instead of every member's stream: mix holds the codec the
-- endpoint takes ("PCMU", "opus/48000/2:111"); '' for a link that mixes
-- for itself.

ALTER TABLE links ADD COLUMN mix TEXT NOT NULL DEFAULT '';
