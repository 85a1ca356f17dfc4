-- Which accused key this monitor judged lying. A report proves only that
-- one signer of each contradicting pair lied; when `gnomon watch --sink`
-- stores its own report it also knows which server its majority rule
-- flagged, and marks that key here. Reports POSTed by anyone else carry
-- no judgment: their keys stay 0.
ALTER TABLE report_accused ADD COLUMN judged BIGINT NOT NULL DEFAULT 0;
