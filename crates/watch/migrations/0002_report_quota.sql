-- Reports are kept as canonical JSON (the parsed report written back: no
-- padding, no unknown members). The check made when a report arrived is
-- kept too, so /reports/ID/verify serves it without verifying again; a row
-- from before this migration has none until its first /verify, which
-- stores it. `size` is the bytes a report takes (body and check), which
-- the storage quotas (per sender prefix and in total) add up.
ALTER TABLE reports ADD COLUMN size BIGINT NOT NULL DEFAULT 0;
ALTER TABLE reports ADD COLUMN check_json TEXT;
UPDATE reports SET size = LENGTH(body);
-- The quotas' sums read this index alone: `size` sits after the body in
-- the row, and reading it there would read every body (on SQLite, through
-- its overflow pages) on every POST.
CREATE INDEX reports_by_sender_size ON reports (sender_prefix, size);
-- The audit pages: newest first, the id as tiebreak.
CREATE INDEX reports_by_time_id ON reports (received_us, id);
