//! `gnomon query --servers LIST.json`: the measurement sequence, the
//! consensus, and the malfeasance report.

use std::process::ExitCode;
use std::time::Duration;

use gnomon_client::{
    format_duration_us, format_utc, no_reports_url, post_report, reports_url, Backoff, Client,
    Electorate, Flag, Plan, PostPolicy, Selection, Sequence, Server,
};
use gnomon_protocol::ServerList;
use serde_json::json;

use super::client_out::{cannot_write, error_kind, ms, print_json, usage, Exit};
use super::query::{answer_json, Args};
use super::signed_servers::Lists;
use crate::words;

/// Servers the RFC asks for at least.
const MIN_SERVERS: usize = 3;

pub(crate) fn run(args: &Args) -> ExitCode {
    let (raw, shown, signed) = match read_list(args) {
        Ok(l) => l,
        Err(code) => return code,
    };
    if let Some(lists) = &signed {
        if !args.json {
            for line in lists.lines() {
                eprintln!("gnomon query: {line}");
            }
        }
    }
    let list = match ServerList::parse(&raw) {
        Ok(l) => l,
        Err(e) => return usage("query", format!("{shown}: not a server list: {e}")),
    };
    let servers = Server::from_list(&list);
    let mut notes: Vec<String> = Vec::new();
    for (i, s) in list.servers.iter().enumerate() {
        if let Err(why) = &s.status {
            let name = s.name.clone().unwrap_or_else(|| format!("entry {}", i + 1));
            notes.push(format!("skipped {name}: {why}"));
        }
    }
    if list.servers.is_empty() {
        return usage("query", format!("{shown}: the list has no servers"));
    }
    if servers.is_empty() {
        // The reasons are the whole answer here: nothing else is printed.
        return usage(
            "query",
            format!(
                "{shown}: no usable server in the list ({})",
                notes.join("; ")
            ),
        );
    }
    if servers.len() < MIN_SERVERS {
        notes.push(format!(
            "the list has {} usable server(s); RFC 10049's measurement sequence asks for at least {MIN_SERVERS}",
            servers.len()
        ));
    }
    let electorate = Electorate::of(&servers);
    let assumption = electorate.assume(args.max_liars.map(usize::from));
    // Enough to outvote f liars with f more silenced (3f + 1 voters), and
    // every server when some are one voter (which of them to ask is
    // not worth guessing).
    let enough = if electorate.voters() < servers.len() {
        servers.len()
    } else {
        (3 * assumption.liars + 1).max(MIN_SERVERS)
    };
    let selection = match (args.all, args.ask) {
        (true, _) => Selection::All,
        (false, n) => Selection::Random(n.map_or(enough, usize::from)),
    };
    if let Selection::Random(k) = selection {
        if k.min(servers.len()) < assumption.needed() {
            notes.push(format!(
                "asking {k} server(s) can give no consensus: {} must answer \
                 (--ask more, --all, or a lower --max-liars)",
                assumption.needed()
            ));
        }
    }
    let plan = Plan {
        selection,
        passes: 2,
        assumption: Some(assumption),
    };
    let mut client = Client::new(args.client_config());
    let seq = match client.measure(&servers, &plan) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gnomon query: {e}");
            if args.json {
                print_json(&json!({
                    "error": { "kind": error_kind(&e), "message": e.to_string() },
                    "exit_code": Exit::Local.code(),
                }));
            }
            return Exit::Local.into();
        }
    };
    let delivery = deliver_report(args, &raw, &list, &seq, &mut notes);
    let quorum = usize::from(args.quorum);
    // The verdict on the servers is in the output either way; a report
    // that was asked for and not written is what the exit code says.
    let code = match delivery.write_error {
        Some(_) => Exit::CantCreate,
        None => exit_code(&seq, quorum),
    };
    let met = quorum_met(&seq, quorum);
    if !met && seq.agreement.consensus.is_some() {
        notes.push(format!(
            "fewer distinct servers agree than the quorum ({quorum}): the consensus is not enough"
        ));
    }
    if args.json {
        let mut out = sequence_json(&servers, &seq, &notes, delivery.file, delivery.posted, code);
        out["quorum"] = json!(quorum);
        out["quorum_met"] = json!(met);
        if let Some(e) = &delivery.write_error {
            out["error"] = json!({ "kind": "save", "message": e });
        }
        if let Some(lists) = &signed {
            out["server_lists"] = lists.json();
        }
        print_json(&out);
    } else {
        print_sequence(&servers, &seq, &notes);
    }
    if let Some(e) = &delivery.write_error {
        eprintln!("gnomon query: {e}");
    }
    code.into()
}

/// The list's bytes and how messages name it, from --servers or from the
/// monitors' signed lists (with what each gave); or the exit code of a
/// list that cannot be had, said.
fn read_list(args: &Args) -> Result<(Vec<u8>, String, Option<Lists>), ExitCode> {
    if let Some(path) = args.servers.as_deref() {
        return match std::fs::read(path) {
            Ok(raw) => Ok((raw, path.display().to_string(), None)),
            Err(e) => Err(usage(
                "query",
                format!(
                    "cannot read the server list {}: {}",
                    path.display(),
                    words::io(&e)
                ),
            )),
        };
    }
    match args.signed.load() {
        Ok(lists) => Ok((
            lists.document.clone(),
            "the monitors' signed lists".to_owned(),
            Some(lists),
        )),
        Err(no) => Err(no.report("query", args.json)),
    }
}

/// What became of the malfeasance report.
struct Delivery {
    /// The file written (--report-out).
    file: Option<String>,
    /// The POST's outcome (--report).
    posted: Option<Result<String, String>>,
    /// Why --report-out could not be written.
    write_error: Option<String>,
}

/// Whether at least `quorum` distinct keys agree with the consensus.
fn quorum_met(seq: &Sequence, quorum: usize) -> bool {
    seq.agreement
        .consensus
        .as_ref()
        .is_some_and(|c| c.agreeing_voters >= quorum)
}

fn exit_code(seq: &Sequence, quorum: usize) -> Exit {
    if seq.malfeasance() {
        Exit::Malfeasance
    } else if quorum_met(seq, quorum) {
        Exit::Ok
    } else if seq.agreement.consensus.is_some() {
        Exit::NoAnswer
    } else if seq
        .entries
        .iter()
        .any(|e| e.result.as_ref().is_err_and(|e| e.is_invalid()))
    {
        Exit::Invalid
    } else {
        Exit::NoAnswer
    }
}

/// Write and send the report, saying in `notes` what was done and, when
/// --report-out or --report was given and nothing was, why not.
fn deliver_report(
    args: &Args,
    raw: &[u8],
    list: &ServerList,
    seq: &Sequence,
    notes: &mut Vec<String>,
) -> Delivery {
    let mut delivery = Delivery {
        file: None,
        posted: None,
        write_error: None,
    };
    let Some(report) = seq.report() else {
        let why = if seq.malfeasance() {
            "a server is outside the consensus, but no pair of answers contradicts: \
             nothing to report"
        } else {
            "no pair of answers contradicts: nothing to report"
        };
        match (&args.report_out, args.report) {
            (Some(path), posting) => notes.push(format!(
                "no report written to {}{}: {why}",
                path.display(),
                if posting { " or posted" } else { "" }
            )),
            (None, true) => notes.push(format!("no report posted: {why}")),
            (None, false) if seq.malfeasance() => notes.push(why.into()),
            (None, false) => {}
        }
        return delivery;
    };
    let body = report.to_json();
    if let Some(path) = &args.report_out {
        match std::fs::write(path, &body) {
            Ok(()) => {
                notes.push(format!(
                    "report written to {} ({} responses)",
                    path.display(),
                    report.entries.len()
                ));
                delivery.file = Some(path.display().to_string());
            }
            Err(e) => {
                let e = cannot_write("the report", path, &e);
                notes.push(e.clone());
                delivery.write_error = Some(e);
            }
        }
    }
    if !args.report {
        return delivery;
    }
    let Some(url) = reports_url(raw, list, args.allow_loopback_http_reports) else {
        notes.push(format!("--report given, but {}", no_reports_url(raw)));
        return delivery;
    };
    let policy = PostPolicy {
        backoff: Backoff {
            initial: args.report_backoff,
            attempts: args.report_attempts,
            ..PostPolicy::default().backoff
        },
        timeout: Duration::from_secs(30),
        allow_loopback_http: args.allow_loopback_http_reports,
    };
    let result = post_report(&url, &body, &policy)
        .map(|p| {
            format!(
                "posted to {url} (HTTP {}, attempt {})",
                p.status, p.attempts
            )
        })
        .map_err(|e| format!("{url}: {e}"));
    notes.push(match &result {
        Ok(m) => format!("report {m}"),
        Err(m) => format!("report NOT delivered: {m}"),
    });
    delivery.posted = Some(result);
    delivery
}

fn name(servers: &[Server], i: usize) -> &str {
    &servers[i].name
}

fn print_sequence(servers: &[Server], seq: &Sequence, notes: &[String]) {
    println!(
        "{:>2}  {:<4}  {:<20}  {:<10}  {:<27}  {:>11}  {:>16}  {:>10}",
        "#", "pass", "server", "version", "time (UTC)", "radius", "offset", "rtt"
    );
    for (i, e) in seq.entries.iter().enumerate() {
        let n = name(servers, e.server);
        match &e.result {
            Ok(a) => {
                let v = &a.verified;
                println!(
                    "{:>2}  {:<4}  {:<20}  {:<10}  {:<27}  {:>11}  {:>16}  {:>10}",
                    i + 1,
                    e.pass + 1,
                    n,
                    v.profile.name,
                    format_utc(v.midpoint_us),
                    format!("±{:.3} s", v.radius_us as f64 / 1e6),
                    format_duration_us(a.offset_us),
                    ms(a.rtt),
                );
            }
            Err(err) => println!("{:>2}  {:<4}  {:<20}  {err}", i + 1, e.pass + 1, n),
        }
    }
    println!();
    match &seq.agreement.consensus {
        Some(c) => {
            let now = gnomon_client_now_us();
            let mid = now + c.midpoint_us();
            println!(
                "consensus    {} ±{:.3} s (offset {}; {} of {} answering servers agree)",
                format_utc(mid.max(0) as u64),
                c.radius_us() as f64 / 1e6,
                format_duration_us(c.midpoint_us()),
                c.agreeing_voters,
                c.answering
            );
        }
        None => println!(
            "consensus    none: {}",
            seq.agreement
                .why_none()
                .as_deref()
                .and_then(|w| w.strip_prefix("no consensus: "))
                .unwrap_or("no answers")
        ),
    }
    println!("assumption   {}", seq.agreement.assumption_text());
    if let Some(why) = seq.agreement.disagreement() {
        println!("DISAGREE     {why}");
    }
    for (group, why) in seq
        .agreement
        .grouped
        .iter()
        .zip(&seq.agreement.grouped_because)
    {
        let names: Vec<&str> = group.iter().map(|&s| name(servers, s)).collect();
        println!(
            "note         {} are one server ({why}): one vote",
            names.join(", ")
        );
    }
    for (s, why) in &seq.agreement.flagged {
        let why = match why {
            Flag::OutsideConsensus => "its time misses the consensus",
            Flag::SelfContradiction => "its own answers contradict each other",
        };
        println!("FLAGGED      {}: {why}", name(servers, *s));
    }
    for &(i, j) in &seq.contradictions {
        let (a, b) = (&seq.entries[i], &seq.entries[j]);
        let (va, vb) = match (&a.result, &b.result) {
            (Ok(x), Ok(y)) => (&x.verified, &y.verified),
            _ => continue,
        };
        println!(
            "MALFEASANCE  answer {} ({}) says at least {}, yet the later answer {} ({}) says at most {}",
            i + 1,
            name(servers, a.server),
            format_utc(va.earliest_us().max(0) as u64),
            j + 1,
            name(servers, b.server),
            format_utc(vb.latest_us().max(0) as u64),
        );
    }
    for (a, b) in seq.contradicting_servers() {
        println!(
            "one lied     {} or {}: their answers cannot both be true",
            name(servers, a),
            name(servers, b)
        );
    }
    let suspects: Vec<&str> = seq.suspects().iter().map(|&s| name(servers, s)).collect();
    if !suspects.is_empty() {
        println!("suspect      {}", suspects.join(", "));
    }
    for n in notes {
        println!("note         {n}");
    }
}

fn gnomon_client_now_us() -> i128 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i128,
        Err(_) => 0,
    }
}

fn sequence_json(
    servers: &[Server],
    seq: &Sequence,
    notes: &[String],
    report_file: Option<String>,
    posted: Option<Result<String, String>>,
    code: Exit,
) -> serde_json::Value {
    let entries: Vec<serde_json::Value> = seq
        .entries
        .iter()
        .map(|e| {
            let mut v = match &e.result {
                Ok(a) => answer_json(a),
                Err(err) => {
                    json!({ "error": { "kind": error_kind(err), "message": err.to_string() } })
                }
            };
            v["server"] = json!(name(servers, e.server));
            v["pass"] = json!(e.pass + 1);
            v
        })
        .collect();
    let consensus = seq.agreement.consensus.as_ref().map(|c| {
        let mid = gnomon_client_now_us() + c.midpoint_us();
        json!({
            "offset_low_us": c.low_us as i64,
            "offset_high_us": c.high_us as i64,
            "time_utc": format_utc(mid.max(0) as u64),
            "radius_us": c.radius_us() as i64,
            "agreeing": c.agreeing.iter().map(|&s| name(servers, s)).collect::<Vec<_>>(),
            "agreeing_voters": c.agreeing_voters,
            "answering": c.answering,
        })
    });
    json!({
        "servers": seq.order.iter().map(|&s| name(servers, s)).collect::<Vec<_>>(),
        "entries": entries,
        "consensus": consensus,
        "flagged": seq.agreement.flagged.iter().map(|(s, f)| json!({
            "server": name(servers, *s),
            "reason": match f {
                Flag::SelfContradiction => "self_contradiction",
                Flag::OutsideConsensus => "outside_consensus",
            },
        })).collect::<Vec<_>>(),
        "contradictions": seq.contradictions.iter().map(|&(i, j)| json!({
            "earlier": i + 1, "later": j + 1,
            "earlier_server": name(servers, seq.entries[i].server),
            "later_server": name(servers, seq.entries[j].server),
        })).collect::<Vec<_>>(),
        "disagreement": seq.agreement.disagreement(),
        "grouped": seq.agreement.grouped.iter()
            .map(|g| g.iter().map(|&s| name(servers, s)).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "grouped_because": seq.agreement.grouped_because,
        "max_liars": seq.agreement.assumption.liars,
        "listed": seq.agreement.assumption.voters,
        "answered": seq.agreement.answered,
        "needed": seq.agreement.assumption.needed(),
        "assumption": seq.agreement.assumption_text(),
        "no_consensus": seq.agreement.why_none(),
        "malfeasance": seq.malfeasance(),
        "suspects": seq.suspects().iter().map(|&s| name(servers, s)).collect::<Vec<_>>(),
        "report_file": report_file,
        "report_post": posted.map(|r| match r {
            Ok(m) => json!({ "ok": true, "message": m }),
            Err(m) => json!({ "ok": false, "message": m }),
        }),
        "notes": notes,
        "exit_code": code.code(),
    })
}
