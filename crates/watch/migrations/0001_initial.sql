-- One schema for SQLite and PostgreSQL. Only types both read the same way
-- through sqlx's Any driver: BIGINT (SQLite's INTEGER, 64-bit) for every
-- number and every time (microseconds since the Unix epoch, UTC), TEXT for
-- the rest. Bytes that are not text (raw responses) are stored as
-- lowercase hex: SQLite's BLOB and PostgreSQL's BYTEA have no common name.

-- The servers the watch knows, as it sees them (from its list).
CREATE TABLE servers (
    name TEXT PRIMARY KEY,
    -- The long-term public key, base64.
    public_key TEXT NOT NULL,
    -- The list entry's addresses, JSON exactly as listed.
    addresses TEXT NOT NULL,
    first_seen_us BIGINT NOT NULL,
    last_seen_us BIGINT NOT NULL
);

-- One check of one server in one version at one time.
CREATE TABLE observations (
    server TEXT NOT NULL REFERENCES servers (name),
    -- The version probed, by profile name (e.g. "rfc", "draft-12").
    version TEXT NOT NULL,
    -- The check ("udp", "tcp", "batch", ...).
    check_name TEXT NOT NULL,
    time_us BIGINT NOT NULL,
    -- "ok" or a short failure reason.
    result TEXT NOT NULL,
    detail TEXT,
    rtt_us BIGINT,
    offset_us BIGINT,
    radius_us BIGINT,
    cert_min_us BIGINT,
    cert_max_us BIGINT,
    response_hex TEXT,
    PRIMARY KEY (server, version, check_name, time_us)
);
CREATE INDEX observations_by_time ON observations (server, time_us);

-- Malfeasance reports that verified, exactly as received.
CREATE TABLE reports (
    -- Hex SHA-256 of the report's canonical content: the id in URLs and
    -- the dedup key, so a replay (however re-encoded) adds nothing.
    id TEXT PRIMARY KEY,
    received_us BIGINT NOT NULL,
    -- The sender's /24 (IPv4) or /48 (IPv6), never the full address.
    sender_prefix TEXT NOT NULL,
    -- The JSON body exactly as received (UTF-8, checked by the parser).
    body TEXT NOT NULL,
    -- The verdict when received ("malfeasance").
    verdict TEXT NOT NULL,
    entries BIGINT NOT NULL,
    contradictions BIGINT NOT NULL
);
CREATE INDEX reports_by_time ON reports (received_us);

-- The servers (long-term keys, base64) a report accuses: both sides of
-- every contradicting pair, since the report cannot tell which one lied.
CREATE TABLE report_accused (
    report_id TEXT NOT NULL REFERENCES reports (id),
    public_key TEXT NOT NULL,
    PRIMARY KEY (report_id, public_key)
);
CREATE INDEX report_accused_by_key ON report_accused (public_key);
