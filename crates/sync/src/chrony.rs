//! Feeding chrony: each consensus as a sample for its SOCK reference clock.
//!
//! ```text
//!  consensus (offset interval) ──Sample::of──▶ Sample { at, offset }
//!    ──encode──▶ 40-byte struct sock_sample ──non-blocking sendto──▶ PATH
//!                                       (chronyd: refclock SOCK PATH)
//! ```
//!
//! `refclock SOCK PATH` makes chronyd bind a Unix datagram socket at PATH
//! and read samples in the format gpsd writes, chrony's `struct
//! sock_sample` (refclock_sock.c):
//!
//! ```text
//!  struct timeval tv;  system time of the measurement
//!  double offset;      true time minus system time at tv, seconds
//!  int pulse;          0: a whole time sample, not a PPS edge
//!  int leap;           0 normal, 1 insert, 2 delete a leap second
//!  int _pad;           ignored
//!  int magic;          0x534f434b ("SOCK")
//! ```
//!
//! in the C layout and byte order of the machine: chrony copies the
//! datagram into the struct after checking its length and magic, so the
//! encoding follows our target's `struct timeval` (`libc::timeval`) and
//! `double`/`int`, not a wire standard. chrony takes tv + offset as the
//! reference time (`UTI_AddDoubleToTimespec(&sys_ts, sample.offset,
//! &ref_ts)`), so a positive offset says the local clock is behind.
//! chrony drops a sample whose tv is in its future or older than
//! 2^(poll+1) s (refclock.c, `valid_sample_time`): samples are sent as
//! soon as they are measured, and the poll in chrony.conf must leave room
//! for the measurement (docs/SYNC.md).
//!
//! The sample has no field for its error: chrony takes half the `delay`
//! of the `refclock SOCK` line as every sample's error. That delay is
//! `2 × chrony-max-radius`, and a consensus wider than `chrony-max-radius`
//! is never sent ([`conf`] prints the lines that say so): chrony is never
//! told a sample is better than it is.
//!
//! chronyd may not be running (no socket yet: ENOENT), may have died
//! (its socket file left behind: ECONNREFUSED) or may be stuck (its queue
//! full: EAGAIN). None of that may stop or slow sync: the socket is
//! non-blocking, every failure (and every sample too wide to send) is
//! counted, and one line is logged each time the outcome changes, not per
//! sample.

use std::io;
use std::mem::{offset_of, size_of};
use std::os::raw::{c_double, c_int};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use gnomon_client::{Consensus, Sequence, Server};

use crate::config::{DurationText, Settings};
pub use crate::counts::ChronySamples as Counters;
use crate::round::Round;
use crate::sink::{Log, Sink};

/// chrony's `SOCK_MAGIC`: "SOCK" read as a big-endian number.
pub const SOCK_MAGIC: u32 = 0x534f_434b;

/// The C struct chrony reads, field for field; only its layout is used.
#[repr(C)]
struct SockSample {
    tv: libc::timeval,
    offset: c_double,
    pulse: c_int,
    leap: c_int,
    pad: c_int,
    magic: c_int,
}

/// Bytes in one sample on this machine (40 on 64-bit Linux).
pub const SAMPLE_LEN: usize = size_of::<SockSample>();

/// One measurement for chrony: at local time `at_us`, the true time was
/// the local time plus `offset_us`, give or take `radius_us`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// The local (system) clock at the moment of measurement, Unix µs.
    pub at_us: i128,
    /// Reference time minus local time at `at_us`, µs.
    pub offset_us: i128,
    /// How far the true offset may be from `offset_us`, µs: the larger
    /// half of the consensus interval. Not in the datagram (chrony's
    /// format has no field for it); [`ChronySock`] sends no sample wider
    /// than the bound its chrony.conf line declares.
    pub radius_us: i128,
}

/// A sample this machine's `struct timeval` cannot carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfRange;

impl core::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("the sample's time does not fit this machine's struct timeval")
    }
}

impl std::error::Error for OutOfRange {}

impl Sample {
    /// The sample of a measurement sequence's consensus: its midpoint, at
    /// the latest local moment among the answers that make it.
    ///
    /// Each answer's offset is already MIDP minus the local clock at the
    /// middle of its round trip (RFC 10049: the server read its clock
    /// somewhere between our send and our receive; the middle is the best
    /// guess, off by at most RTT/2, which the interval's width holds). All
    /// answers of a sequence are placed on one local timeline (see
    /// gnomon-client's `clock`), so the consensus offset holds at any of
    /// their moments; the latest is the freshest for chrony's age check.
    /// `None` without a consensus.
    pub fn of_sequence(sequence: &Sequence) -> Option<Sample> {
        let consensus = sequence.agreement.consensus.as_ref()?;
        let at_us = sequence
            .answers()
            .filter(|(e, _)| consensus.agreeing.contains(&e.server))
            .map(|(_, a)| a.local_midpoint_us)
            .max()?;
        Some(Sample::at(at_us, consensus))
    }

    /// The sample of a sync round whose quorum agrees: the consensus of
    /// the voting servers, at the latest local moment among their answers
    /// (as [`Sample::of_sequence`]). `None` when the round may not be used.
    pub fn of_round(round: &Round) -> Option<Sample> {
        let consensus = round.usable()?;
        let at_us = round
            .sequence
            .answers()
            .filter(|(e, _)| consensus.agreeing.contains(&round.asked[e.server]))
            .map(|(_, a)| a.local_midpoint_us)
            .max()?;
        Some(Sample::at(at_us, consensus))
    }

    /// A consensus's midpoint at `at_us`. The midpoint is rounded down, so
    /// the upper half of the interval is the larger (by a µs at most).
    fn at(at_us: i128, consensus: &Consensus) -> Sample {
        let offset_us = consensus.midpoint_us();
        Sample {
            at_us,
            offset_us,
            radius_us: (consensus.high_us - offset_us).max(offset_us - consensus.low_us),
        }
    }

    /// The datagram chrony reads: `struct sock_sample` in this machine's
    /// layout, padding zero.
    pub fn encode(&self) -> Result<[u8; SAMPLE_LEN], OutOfRange> {
        let secs = self.at_us.div_euclid(1_000_000);
        let micros = self.at_us.rem_euclid(1_000_000);
        let raw = SockSample {
            tv: libc::timeval {
                // The field types, not named: libc deprecates naming
                // time_t and suseconds_t on musl (they will widen there).
                tv_sec: secs.try_into().map_err(|_| OutOfRange)?,
                tv_usec: micros.try_into().map_err(|_| OutOfRange)?,
            },
            // µs to seconds: exact to the µs for any offset below 2^53 µs
            // (285 years).
            offset: self.offset_us as c_double / 1e6,
            pulse: 0,
            leap: 0,
            pad: 0,
            magic: SOCK_MAGIC as c_int,
        };
        let mut out = [0u8; SAMPLE_LEN];
        let tv = offset_of!(SockSample, tv);
        let mut put = |at: usize, bytes: &[u8]| out[at..at + bytes.len()].copy_from_slice(bytes);
        put(
            tv + offset_of!(libc::timeval, tv_sec),
            &raw.tv.tv_sec.to_ne_bytes(),
        );
        put(
            tv + offset_of!(libc::timeval, tv_usec),
            &raw.tv.tv_usec.to_ne_bytes(),
        );
        put(offset_of!(SockSample, offset), &raw.offset.to_ne_bytes());
        put(offset_of!(SockSample, pulse), &raw.pulse.to_ne_bytes());
        put(offset_of!(SockSample, leap), &raw.leap.to_ne_bytes());
        put(offset_of!(SockSample, pad), &raw.pad.to_ne_bytes());
        put(offset_of!(SockSample, magic), &raw.magic.to_ne_bytes());
        Ok(out)
    }
}

/// How the last send went, to log changes only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delivery {
    Delivered,
    Failed(io::ErrorKind),
    TooWide,
}

/// Why a sample did not reach chrony.
#[derive(Debug)]
pub enum NotSent {
    /// Its radius exceeds the bound chrony was told (`chrony-max-radius`):
    /// it was not sent.
    TooWide {
        /// The sample's radius, µs.
        radius_us: i128,
        /// The bound, µs.
        max_us: i128,
    },
    /// The socket refused it (or it does not fit a `struct timeval`).
    Io(io::Error),
}

impl core::fmt::Display for NotSent {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NotSent::TooWide { radius_us, max_us } => write!(
                f,
                "the consensus radius ±{:.3} s exceeds chrony-max-radius \
                 ({} s, the error the refclock's `delay {}` declares)",
                *radius_us as f64 / 1e6,
                seconds(*max_us),
                seconds(2 * max_us)
            ),
            NotSent::Io(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for NotSent {}

/// Sends samples to chrony's SOCK socket at a path, without ever blocking.
pub struct ChronySock {
    path: PathBuf,
    /// The radius chrony.conf declares (its `delay` is twice this), µs.
    max_radius_us: i128,
    /// Unbound and non-blocking; made at the first send, remade after a
    /// failure to make it.
    socket: Option<UnixDatagram>,
    last: Option<Delivery>,
    counters: Arc<Counters>,
    log: Log,
}

impl ChronySock {
    /// A sender to `path` (chrony creates the socket; it need not exist
    /// yet) of samples no wider than `max_radius` (the bound the refclock
    /// line declares as `delay`, twice it), logging changes of outcome to
    /// `log`.
    pub fn new(path: impl Into<PathBuf>, max_radius: Duration, log: Log) -> ChronySock {
        ChronySock {
            path: path.into(),
            max_radius_us: max_radius.as_micros() as i128,
            socket: None,
            last: None,
            counters: Arc::default(),
            log,
        }
    }

    /// Where samples go.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The counts of samples sent and failed.
    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    /// Send one sample, unless its radius exceeds the bound chrony was
    /// told. Never blocks and never panics; a sample not sent is counted,
    /// returned for the caller's status, and logged only when the outcome
    /// differs from the previous one.
    pub fn send(&mut self, sample: &Sample) -> Result<(), NotSent> {
        let result = if sample.radius_us > self.max_radius_us {
            Err(NotSent::TooWide {
                radius_us: sample.radius_us,
                max_us: self.max_radius_us,
            })
        } else {
            self.try_send(sample).map_err(NotSent::Io)
        };
        let (counter, outcome) = match &result {
            Ok(()) => (&self.counters.sent, Delivery::Delivered),
            Err(NotSent::TooWide { .. }) => (&self.counters.too_wide, Delivery::TooWide),
            Err(NotSent::Io(e)) => (&self.counters.failed, Delivery::Failed(e.kind())),
        };
        let count = counter.fetch_add(1, Ordering::Relaxed) + 1;
        if self.last != Some(outcome) {
            let path = self.path.display();
            (self.log)(&match &result {
                Ok(()) => format!("chrony: sending samples to the SOCK refclock at {path}"),
                Err(e @ NotSent::TooWide { .. }) => format!(
                    "warning: chrony: not sending: {e}: chrony would take it for more \
                     precise than it is; counted ({count} so far), logged again when this \
                     changes (raise chrony-max-radius and chrony.conf with it: \
                     gnomon sync --print-chrony-conf)"
                ),
                Err(NotSent::Io(e)) => format!(
                    "warning: chrony: cannot send samples to {path} ({e}): {}; \
                     counted ({count} so far), logged again when this changes",
                    hint(e.kind()),
                ),
            });
            self.last = Some(outcome);
        }
        result
    }

    fn try_send(&mut self, sample: &Sample) -> io::Result<()> {
        let bytes = sample
            .encode()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let socket = match &self.socket {
            Some(s) => s,
            None => {
                let s = UnixDatagram::unbound()?;
                s.set_nonblocking(true)?;
                &*self.socket.insert(s)
            }
        };
        let n = socket.send_to(&bytes, &self.path)?;
        if n != bytes.len() {
            // A datagram is sent whole or not at all; keep the check honest.
            return Err(io::Error::new(io::ErrorKind::WriteZero, "short datagram"));
        }
        Ok(())
    }
}

/// The service's sink for `--chrony-sock`: each round whose quorum agrees
/// becomes one sample; a round that may not be used, or whose consensus
/// is wider than `chrony-max-radius`, sends nothing, so chrony sees the
/// source go quiet (its reachability falls) rather than a guess.
impl Sink for ChronySock {
    fn name(&self) -> &str {
        "chrony"
    }

    fn round(&mut self, round: &Round, _servers: &[Server]) -> Result<(), String> {
        if let Some(sample) = Sample::of_round(round) {
            // A sample not sent is counted, and logged by `send` when the
            // outcome changes; an error here would be logged every round.
            let _ = self.send(&sample);
        }
        Ok(())
    }
}

/// The chrony.conf lines for these settings (`gnomon sync
/// --print-chrony-conf`): the `refclock SOCK` line at `chrony-sock`, polled
/// at least as long as the longest wait between rounds (interval + jitter)
/// so that every poll has a sample, with `delay` twice `chrony-max-radius`,
/// and the `maxdistance` that lets chrony select a source that far off:
/// twice the bound (the bound again for the dispersion chrony adds between
/// samples), never under chrony's default of 3 s. An error when there is
/// no `chrony-sock`, or it cannot be written in chrony.conf.
pub fn conf(settings: &Settings) -> Result<String, String> {
    let Some(path) = &settings.chrony_sock else {
        return Err(
            "no chrony-sock: give --chrony-sock PATH (or chrony-sock in [sync]), \
                    the socket the refclock line names"
                .into(),
        );
    };
    // chrony.conf splits a line at white space, and a refclock parameter at
    // `:` (driver options, which SOCK has none of).
    let text = path
        .to_str()
        .filter(|p| !p.contains(|c: char| c.is_whitespace() || c == ':'))
        .ok_or_else(|| {
            format!(
                "chrony-sock {} cannot be written in chrony.conf \
                 (white space, `:` or not UTF-8); choose another path",
                path.display()
            )
        })?;
    let bound = settings.chrony_max_radius;
    let longest_wait_ms = settings.interval.as_millis() * (100 + u128::from(settings.jitter)) / 100;
    let poll = (0..)
        .find(|&p: &u32| 1000u128 << p >= longest_wait_ms)
        .unwrap_or(0);
    let radius_us = bound.as_micros() as i128;
    let maxdistance_us = (2 * radius_us).max(CHRONY_MAXDISTANCE_US);
    Ok(format!(
        "# gnomon sync: rounds every {} +/- {} % (at most {} apart), samples never wider than +/-{}\n\
         refclock SOCK {text} refid RTIM poll {poll} filter 1 delay {}\n\
         # maxdistance applies to every source, not only this refclock (docs/SYNC.md)\n\
         maxdistance {}\n",
        DurationText(settings.interval),
        settings.jitter,
        DurationText(Duration::from_millis(longest_wait_ms as u64)),
        DurationText(bound),
        seconds(2 * radius_us),
        seconds(maxdistance_us),
    ))
}

/// chrony's default `maxdistance`, µs.
const CHRONY_MAXDISTANCE_US: i128 = 3_000_000;

/// µs as seconds for chrony.conf and the log: `6`, `0.25`, `0.002`.
fn seconds(us: i128) -> String {
    let whole = us.div_euclid(1_000_000);
    let frac = us.rem_euclid(1_000_000);
    if frac == 0 {
        return whole.to_string();
    }
    let digits = format!("{frac:06}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// What an operator should look at, for the errors chronyd's state causes.
fn hint(kind: io::ErrorKind) -> &'static str {
    match kind {
        io::ErrorKind::NotFound => "is chronyd running with `refclock SOCK` at this path?",
        io::ErrorKind::ConnectionRefused => {
            "nothing reads this path: chronyd stopped, or it is not a socket"
        }
        io::ErrorKind::WouldBlock => "chronyd is not reading its socket; samples are dropped",
        io::ErrorKind::PermissionDenied => {
            "the socket must be writable by this user (chronyd creates it as root)"
        }
        _ => "will retry at the next measurement",
    }
}

#[cfg(test)]
mod tests;
