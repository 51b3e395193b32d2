-- 0007_sip_bindings_no_expiry_index: REGISTERs are answered only after their
-- binding is committed (group commit), so each upsert is on the hot path.
-- The expires_at index goes: only the start-up load and the purge read by
-- expiry, and a scan of the bindings is cheap there, while the index cost
-- two B-tree changes on every refresh.

DROP INDEX sip_bindings_expires_idx;
