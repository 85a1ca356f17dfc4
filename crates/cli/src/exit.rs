//! The exit statuses of every `gnomon` command, in one table.
//!
//! The codes below 64 are gnomon's own verdicts, so a script can tell "the
//! server is down" from "the server lied"; from 64 on they are the BSD
//! sysexits codes, which service managers and shell scripts already know.
//! The table is public because it is printed in three places that must
//! agree: docs/EXIT-CODES.md, each man page's EXIT STATUS section (written
//! by crates/xtask) and the constants the commands return; the tests
//! compare them.

/// Success: an answer verified, a consensus reached, a server stopped
/// cleanly on a signal.
pub const OK: u8 = 0;
/// No answer, or too few answers for a consensus.
pub const NO_ANSWER: u8 = 1;
/// An answer, report or input that fails verification or parsing.
pub const INVALID: u8 = 2;
/// Malfeasance: answers that contradict each other; `now`: the last
/// round and the floor do.
pub const MALFEASANCE: u8 = 3;
/// `sync --check`: the local clock is outside the consensus; `now
/// --at-least`: the time is not proven to be past TIME.
pub const OUTSIDE: u8 = 4;
/// `sync --set-clock`: the step was refused by gnomon's own rules.
pub const STEP_REFUSED: u8 = 5;
/// EX_USAGE: bad arguments, a bad configuration, an unreadable input.
pub const USAGE: u8 = 64;
/// EX_DATAERR: existing data that does not fit what was asked.
pub const DATA_ERR: u8 = 65;
/// EX_NOINPUT: a key file that cannot be read.
pub const NO_INPUT: u8 = 66;
/// EX_UNAVAILABLE: a service we depend on (the database) cannot be reached.
pub const UNAVAILABLE: u8 = 69;
/// EX_SOFTWARE: something failed inside gnomon.
pub const SOFTWARE: u8 = 70;
/// EX_OSERR: the system refused: a port in use, no random bytes, the clock
/// not settable.
pub const OS_ERROR: u8 = 71;
/// EX_CANTCREAT: an output file cannot be created.
pub const CANT_CREATE: u8 = 73;
/// EX_IOERR: a directory that cannot be read.
pub const IO_ERROR: u8 = 74;

/// One row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// The exit code.
    pub code: u8,
    /// The commands that return it (`every command` for the common ones).
    pub commands: &'static str,
    /// What it means, in one sentence.
    pub meaning: &'static str,
}

/// Every exit code any command returns, lowest first.
pub const TABLE: &[Status] = &[
    Status {
        code: OK,
        commands: "every command",
        meaning: "success: an answer verified, a consensus reached, the input decoded, \
                  a server stopped by SIGTERM or SIGINT",
    },
    Status {
        code: NO_ANSWER,
        commands: "query, bench load, sync, health, relay, verify-proof, now",
        meaning: "no answer (timeouts, a refused port) or too few answers for a consensus; \
                  health: the server is unhealthy or unreachable; relay, verify-proof: \
                  too few keys in the bundle, too few agree, or the interval is too wide; \
                  now: no proof of the time now (sync has only a floor or nothing, or does \
                  not answer)",
    },
    Status {
        code: INVALID,
        commands: "query, inspect, verify-report, bench load, verify-proof",
        meaning: "an answer, report, proof bundle or input that fails verification or parsing",
    },
    Status {
        code: MALFEASANCE,
        commands: "query, verify-report, relay, verify-proof, now",
        meaning: "malfeasance: contradicting answers, a server outside the consensus, \
                  a report or proof bundle that proves a lie; now: the last round lies \
                  wholly below the floor, so one of them is wrong and nothing is proven",
    },
    Status {
        code: OUTSIDE,
        commands: "sync --check, now --at-least",
        meaning: "the local clock is outside the consensus interval plus --max-offset; \
                  now --at-least: it is not proven that the time now is no earlier than TIME",
    },
    Status {
        code: STEP_REFUSED,
        commands: "sync --set-clock",
        meaning: "the step was refused: the consensus is wider than --max-radius, \
                  or below the proven floor",
    },
    Status {
        code: USAGE,
        commands: "every command",
        meaning: "usage error (EX_USAGE): bad arguments or values, a bad configuration, \
                  an unreadable input file or server list",
    },
    Status {
        code: DATA_ERR,
        commands: "keygen, delegate, watch",
        meaning: "the output directory holds delegations of another key or host; a PKCS#11 \
                  token that will not serve: not a module, no Ed25519, a wrong or locked PIN, \
                  a key that is not Ed25519; watch: the publishing key is encrypted, not \
                  Ed25519 or not an OpenSSH private key (EX_DATAERR)",
    },
    Status {
        code: NO_INPUT,
        commands: "keygen, delegate, watch",
        meaning: "the long-term key file cannot be read; no such PKCS#11 module, token, \
                  key or PIN file, or a PIN file others may read or another user owns; \
                  watch: the publishing key file cannot be read (EX_NOINPUT)",
    },
    Status {
        code: UNAVAILABLE,
        commands: "watch, report-server",
        meaning: "the database does not answer within 10 s, refuses the connection, or \
                  refuses the user or database named in the URL; watch --servers-url: \
                  fewer than --servers-threshold of the pinned monitors give a list \
                  (EX_UNAVAILABLE)",
    },
    Status {
        code: SOFTWARE,
        commands: "query, sync, serve, watch, report-server, bench, keygen, delegate, relay",
        meaning: "an internal failure (EX_SOFTWARE): a worker or the runtime died, \
                  a database failed; client commands: no socket or no random bytes; \
                  keygen, delegate: a PKCS#11 token failed or signed wrongly",
    },
    Status {
        code: OS_ERROR,
        commands: "serve, watch, report-server, bench null-server, keygen, delegate, sync",
        meaning: "the system refused (EX_OSERR): the address is in use or not ours to bind, \
                  no random bytes; sync --set-clock: the clock could not be set",
    },
    Status {
        code: CANT_CREATE,
        commands: "keygen, delegate, query, relay, watch, report-server",
        meaning: "an output file exists or cannot be written; keygen: the PKCS#11 token \
                  already holds a key of that label; watch, report-server: the SQLite \
                  database file cannot be created or opened (EX_CANTCREAT)",
    },
    Status {
        code: IO_ERROR,
        commands: "delegate",
        meaning: "the output directory cannot be read (EX_IOERR)",
    },
];

/// The row of `code`; every code a command returns has one.
pub fn status(code: u8) -> Option<&'static Status> {
    TABLE.iter().find(|s| s.code == code)
}

/// Whether a row of the table, whose commands read like `query, bench
/// load, sync --check`, applies to the command at `path` (`bench load`;
/// the empty path is gnomon itself, to which every row applies).
fn applies(commands: &str, path: &str) -> bool {
    if path.is_empty() || commands.starts_with("every command") {
        return true;
    }
    commands.split(", ").any(|c| {
        // `sync --check` applies to sync; `bench` to `bench load`; `bench
        // load` to `bench`, which is about both. Man pages join words with
        // dashes, as some command names do: compare without either.
        let c = c.split(" --").next().unwrap_or(c).replace('-', " ");
        let path = path.replace('-', " ");
        c == path || path.starts_with(&format!("{c} ")) || c.starts_with(&format!("{path} "))
    })
}

/// The rows of the codes the command at `path` (`query`, `bench load`)
/// can return, lowest first.
pub fn rows_for(path: &str) -> Vec<&'static Status> {
    TABLE.iter().filter(|s| applies(s.commands, path)).collect()
}

/// The `Exit codes:` section of the command at `path`'s `--help`, made from
/// the table, for the commands whose help does not word its own.
pub fn help_section(path: &str) -> String {
    const WIDTH: usize = 78;
    const HANG: &str = "      ";
    let mut out = String::from("Exit codes:");
    for row in rows_for(path) {
        let mut line = format!("\n  {:<3} ", row.code);
        let mut len = line.len() - 1;
        for word in row.meaning.split_whitespace() {
            if len + word.len() + 1 > WIDTH && len > HANG.len() {
                line.push('\n');
                line.push_str(HANG);
                len = HANG.len();
            } else if !line.ends_with(' ') {
                line.push(' ');
                len += 1;
            }
            line.push_str(word);
            len += word.len();
        }
        out.push_str(&line);
    }
    out.push_str("\n\nEvery command's codes: the EXIT STATUS section of gnomon(1).");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_follow_the_command() {
        let codes = |p: &str| rows_for(p).iter().map(|s| s.code).collect::<Vec<_>>();
        assert_eq!(codes("").len(), TABLE.len());
        assert!(codes("serve").contains(&OS_ERROR));
        assert!(!codes("serve").contains(&MALFEASANCE));
        assert!(codes("sync").contains(&OUTSIDE));
        assert!(codes("now").contains(&OUTSIDE) && codes("now").contains(&MALFEASANCE));
        assert!(!codes("now").contains(&OS_ERROR));
        assert!(codes("bench load").contains(&INVALID));
        assert!(!codes("bench load").contains(&OS_ERROR));
        assert!(codes("bench null-server").contains(&OS_ERROR));
        assert!(codes("config check").contains(&USAGE));
    }

    #[test]
    fn a_help_section_lists_each_code_once_within_the_width() {
        let s = help_section("delegate");
        for row in rows_for("delegate") {
            assert_eq!(
                s.matches(&format!("\n  {:<3} ", row.code)).count(),
                1,
                "{s}"
            );
        }
        assert!(s.lines().all(|l| l.len() <= 78), "{s}");
    }
}
