//! The exit codes of `gnomon sync`, apart from the command (sync.rs is
//! long enough), and checked against the one table of every command's.

use std::process::ExitCode;

/// Exit codes of `gnomon sync`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    Ok = crate::exit::OK as isize,
    NoConsensus = crate::exit::NO_ANSWER as isize,
    Outside = crate::exit::OUTSIDE as isize,
    Refused = crate::exit::STEP_REFUSED as isize,
    Local = crate::exit::SOFTWARE as isize,
    ClockNotSet = crate::exit::OS_ERROR as isize,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

/// The exit-code table of `gnomon sync --help`.
pub(crate) const EXIT_CODES: &str = "\
Exit codes:
  0   success: a consensus (--once); the clock stepped or already inside it (--set-clock);
      the clock inside the consensus interval ± --max-offset (--check); the state printed (--status);
      the floor removed (--clear-floor)
  1   no consensus: too few servers answered or agreed (fewer than --quorum); --status,
      --clear-floor: no state (or none that can be read)
  4   --check: the local clock is outside the consensus interval ± --max-offset
  5   --set-clock: step refused (consensus wider than --max-radius, or below the proven floor)
  64  usage or configuration error, no usable server list
  70  local failure (no socket, no random bytes; --clear-floor: the state cannot be locked or saved)
  71  the system refused: --set-clock could not set the clock (CAP_SYS_TIME missing?),
      or the metrics address is in use";

#[cfg(test)]
mod tests {
    use super::Exit;

    /// Each code sync returns is in the one table (gnomon(1),
    /// docs/EXIT-CODES.md), on a row that names sync.
    #[test]
    fn every_exit_code_is_in_the_table_under_sync() {
        for e in [
            Exit::Ok,
            Exit::NoConsensus,
            Exit::Outside,
            Exit::Refused,
            Exit::Local,
            Exit::ClockNotSet,
        ] {
            let row = crate::exit::status(e as u8).unwrap_or_else(|| panic!("{e:?}"));
            assert!(
                row.commands.starts_with("every command") || row.commands.contains("sync"),
                "{e:?}: {row:?}"
            );
        }
    }
}
