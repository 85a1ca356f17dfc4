//! `gnomon_now`: ask a running `gnomon sync` on its now socket what time
//! it is proven to be (docs/NOW.md): one JSON line each way. `std` only.
//! The entry point checks its arguments (the one `unsafe` here), `ask`
//! talks to the socket and `parse` reads the answer.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

extern crate std;

use core::ffi::c_char;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::args::{c_message, guard, message_or_text, writable};
use crate::error::GnomonError;
use crate::message::{write_message, MESSAGE_LEN};
use crate::types::{GNOMON_MESSAGE_LEN, GNOMON_NOW_NONE};

/// What `gnomon_now` learnt from `gnomon sync` (docs/NOW.md describes each
/// member of the answer these come from).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GnomonNowResult {
    /// `GNOMON_OK`, or why not; the same value the call returned.
    pub code: GnomonError,
    /// `GNOMON_NOW_NONE`, `GNOMON_NOW_FLOOR`, `GNOMON_NOW_INTERVAL` or
    /// `GNOMON_NOW_CONTRADICTION`.
    pub known: i32,
    /// The earliest the time can be now, µs since the Unix epoch (the
    /// floor for `GNOMON_NOW_FLOOR`; 0 for `GNOMON_NOW_NONE`).
    pub earliest_unix_us: i64,
    /// The latest it can be (`GNOMON_NOW_INTERVAL` only; else 0).
    pub latest_unix_us: i64,
    /// The round of `gnomon sync` that proved it, counted from 1 since sync
    /// started (`GNOMON_NOW_INTERVAL` only; else 0).
    pub round: u64,
    /// Seconds (boot clock) since that round ended.
    pub age_s: f64,
    /// How many servers agreed in that round.
    pub servers: u32,
    /// The wall clock as sync read it for this answer, Unix µs.
    pub wall_clock_unix_us: i64,
    /// 1 when that wall clock lies inside what is known, 0 when not, -1
    /// when nothing is known.
    pub wall_clock_inside: i32,
    /// The drift bound the interval is widened by, ppm.
    pub drift_ppm: u32,
    /// NUL-terminated: why the call failed, or "ok".
    pub message: [c_char; GNOMON_MESSAGE_LEN],
}

/// Ask the `gnomon sync` answering on the Unix socket `socket_path` (NULL:
/// `/run/gnomon/now.sock`) what time it is proven to be now, and fill
/// `*out`. Blocks at most 2 s. `GNOMON_OK` means sync answered: check
/// `known` for what it could prove. `GNOMON_ERR_REFUSED`: no socket or
/// nobody listening (or no permission: see `message`);
/// `GNOMON_ERR_TIMEOUT`: no answer in time; `GNOMON_ERR_MALFORMED`: an
/// answer not in the protocol, or an error answer ("busy"). `std` builds
/// only.
///
/// # Safety
/// `socket_path` is NULL or a NUL-terminated string; `out` points to a
/// writable, aligned `gnomon_now_result`.
#[no_mangle]
pub unsafe extern "C" fn gnomon_now(
    socket_path: *const c_char,
    out: *mut GnomonNowResult,
) -> GnomonError {
    if let Err(e) = writable(out) {
        return e;
    }
    let mut message = [0u8; MESSAGE_LEN];
    let mut answer = None;
    let code = guard(|| {
        let path = if socket_path.is_null() {
            DEFAULT_SOCKET
        } else {
            // SAFETY: non-NULL and NUL-terminated by the caller's promise.
            let c = unsafe { core::ffi::CStr::from_ptr(socket_path) };
            match c.to_str() {
                Ok("") => return GnomonError::GnomonErrEmpty,
                Ok(p) if p.len() > 107 => return GnomonError::GnomonErrTooLong,
                Ok(p) => p,
                Err(_) => return GnomonError::GnomonErrArgument,
            }
        };
        match ask(path, &mut message) {
            Ok(a) => {
                answer = Some(a);
                GnomonError::GnomonOk
            }
            Err(e) => e,
        }
    });
    message_or_text(&mut message, code);
    let a = answer.filter(|_| code == GnomonError::GnomonOk);
    let result = GnomonNowResult {
        code,
        known: a.map_or(GNOMON_NOW_NONE, |a| a.known),
        earliest_unix_us: a.map_or(0, |a| a.earliest_unix_us),
        latest_unix_us: a.map_or(0, |a| a.latest_unix_us),
        round: a.map_or(0, |a| a.round),
        age_s: a.map_or(0.0, |a| a.age_s),
        servers: a.map_or(0, |a| a.servers),
        wall_clock_unix_us: a.map_or(0, |a| a.wall_clock_unix_us),
        wall_clock_inside: a.map_or(-1, |a| a.wall_clock_inside),
        drift_ppm: a.map_or(0, |a| a.drift_ppm),
        message: c_message(&message),
    };
    // SAFETY: `out` checked by `writable` above.
    unsafe { out.write(result) };
    code
}

/// Where `gnomon sync` answers unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/run/gnomon/now.sock";
/// How long sync has to answer.
pub const TIMEOUT: Duration = Duration::from_secs(2);
/// Longest answer read.
const MAX_ANSWER: u64 = 64 * 1024;

/// What the answer says, in C's terms (`gnomon_now_result`'s fields).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Answer {
    /// 0 none, 1 floor, 2 interval.
    pub known: i32,
    /// Unix µs (0 when unknown).
    pub earliest_unix_us: i64,
    /// Unix µs (0 unless an interval).
    pub latest_unix_us: i64,
    /// The round (0 unless an interval).
    pub round: u64,
    /// Seconds since the round (0 unless an interval).
    pub age_s: f64,
    /// Servers of the round.
    pub servers: u32,
    /// The wall clock as sync read it.
    pub wall_clock_unix_us: i64,
    /// 1 inside, 0 outside, -1 nothing to compare with.
    pub wall_clock_inside: i32,
    /// ρ.
    pub drift_ppm: u32,
}

/// Ask `path`; on failure the message says why.
pub fn ask(path: &str, message: &mut [u8; MESSAGE_LEN]) -> Result<Answer, GnomonError> {
    let fail = |message: &mut [u8; MESSAGE_LEN], code, why: &dyn std::fmt::Display| {
        write_message(message, format_args!("{path}: {why}"));
        Err(code)
    };
    let mut s = match UnixStream::connect(path) {
        Ok(s) => s,
        Err(e) => return fail(message, GnomonError::GnomonErrRefused, &e),
    };
    if let Err(e) = s
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|()| s.set_write_timeout(Some(TIMEOUT)))
        .and_then(|()| s.write_all(b"{}\n"))
    {
        return fail(message, GnomonError::GnomonErrLocal, &e);
    }
    let mut line = std::string::String::new();
    match BufReader::new(s.take(MAX_ANSWER)).read_line(&mut line) {
        Ok(_) => {}
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            return fail(message, GnomonError::GnomonErrTimeout, &"no answer in time");
        }
        Err(e) => return fail(message, GnomonError::GnomonErrLocal, &e),
    }
    match parse(&line) {
        Ok(a) => Ok(a),
        Err(why) => fail(message, GnomonError::GnomonErrMalformed, &why),
    }
}

/// One answer line.
pub fn parse(line: &str) -> Result<Answer, std::string::String> {
    use serde_json::Value;
    let v: Value = serde_json::from_str(line.trim()).map_err(|e| std::format!("not JSON: {e}"))?;
    if let Some(e) = v.get("error") {
        return Err(std::format!(
            "gnomon sync says: {}",
            e.as_str().unwrap_or("?")
        ));
    }
    if v["v"] != 1 {
        return Err("not protocol version 1".into());
    }
    let known = match v["known"].as_str() {
        Some("none") => 0,
        Some("floor") => 1,
        Some("interval") => 2,
        Some("contradiction") => 3,
        _ => return Err("`known` is missing or unknown".into()),
    };
    let int = |k: &str| v[k].as_i64().unwrap_or(0);
    let src = &v["source"];
    Ok(Answer {
        known,
        earliest_unix_us: int("earliest_unix_us"),
        latest_unix_us: int("latest_unix_us"),
        round: src["round"].as_u64().unwrap_or(0),
        age_s: src["age_s"].as_f64().unwrap_or(0.0),
        servers: src["servers"].as_array().map_or(0, |a| a.len() as u32),
        wall_clock_unix_us: int("wall_clock_unix_us"),
        wall_clock_inside: v["wall_clock_inside"].as_bool().map_or(-1, i32::from),
        drift_ppm: v["drift_ppm"].as_u64().unwrap_or(0) as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_and_errors_say_why() {
        let a = parse(
            r#"{"v":1,"known":"interval","earliest_unix_us":5,"latest_unix_us":9,
               "source":{"round":2,"servers":["a","b","c"],"age_s":1.5},
               "wall_clock_unix_us":7,"wall_clock_inside":true,"drift_ppm":100,
               "at_least_unix_us":null,"at_least_proven":null}"#,
        )
        .unwrap();
        assert_eq!((a.known, a.earliest_unix_us, a.latest_unix_us), (2, 5, 9));
        assert_eq!((a.round, a.servers, a.age_s), (2, 3, 1.5));
        assert_eq!((a.wall_clock_inside, a.drift_ppm), (1, 100));
        let n = parse(r#"{"v":1,"known":"none","earliest_unix_us":null,"wall_clock_unix_us":7,"wall_clock_inside":null,"drift_ppm":100}"#).unwrap();
        assert_eq!((n.known, n.wall_clock_inside, n.round), (0, -1, 0));
        assert!(parse(r#"{"v":1,"error":"busy"}"#)
            .unwrap_err()
            .contains("busy"));
        let c = parse(
            r#"{"v":1,"known":"contradiction","earliest_unix_us":5,"latest_unix_us":9,
               "source":{"round":4,"servers":["a","b","c"],"age_s":0.5},"floor_unix_us":20,
               "wall_clock_unix_us":7,"wall_clock_inside":null,"drift_ppm":100}"#,
        )
        .unwrap();
        assert_eq!((c.known, c.earliest_unix_us, c.latest_unix_us), (3, 5, 9));
        assert_eq!((c.round, c.wall_clock_inside), (4, -1));
        assert!(parse("{").is_err());
        assert!(parse(r#"{"v":2,"known":"none"}"#).is_err());
    }
}
