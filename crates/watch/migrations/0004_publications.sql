-- What `gnomon watch --publish-key` last published, one row per monitor
-- key: the sequence only grows, and clients refuse a lower one, so the last
-- is kept across restarts; the document and its signature are kept too, so
-- a restarted monitor serves its last list (until that list's own expiry)
-- before its first round is done.
CREATE TABLE publications (
    -- The monitor key's public half, base64 (several monitors may share
    -- one PostgreSQL database, each under its own key).
    monitor_key TEXT PRIMARY KEY,
    sequence BIGINT NOT NULL,
    published_us BIGINT NOT NULL,
    expires_us BIGINT NOT NULL,
    -- The exact bytes served at /servers.json (UTF-8 JSON).
    document TEXT NOT NULL,
    -- The armored signature served at /servers.json.sig.
    signature TEXT NOT NULL
);
