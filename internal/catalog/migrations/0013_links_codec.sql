-- 0013_links_codec: a plain RTP link or multicast group may name the codec
-- its endpoint sends ("VP8/90000", "opus/48000/2"), so that receivers and
-- recordings know what a dynamic payload type carries; '' for none named.

ALTER TABLE links ADD COLUMN codec TEXT NOT NULL DEFAULT '';
