//! One round of the service: whom to ask, the measurement, and what it
//! leaves behind (backoff, exclusions, the floor, the report, the state
//! and the chain, the anchor, the metrics, the log line, the sinks).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use gnomon_client::{describe_assumption, format_utc, Backoff, Electorate, QueryError, TcpMode};

use super::summary::flag_words;
use super::{board_floor, Outcome, Service};
use crate::decision::{below_floor, raise_floor};
use crate::now::Anchor;
use crate::round;
use crate::state::{self, floor, Excluded, LastRound};

/// Longest a server that does not answer is left out: 2^6 rounds.
const MAX_BACKOFF_SHIFT: u32 = 6;

impl Service {
    /// Whom to ask this round: every server not backing off; when that is
    /// fewer than `min-servers`, those backing off too, soonest due first.
    fn choose(&self) -> Vec<usize> {
        let n = self.list.servers.len();
        let mut ask: Vec<usize> = (0..n)
            .filter(|&i| self.backoff[i].1 <= self.round_no)
            .collect();
        if ask.len() < self.settings.min_servers {
            let mut waiting: Vec<usize> = (0..n).filter(|i| !ask.contains(i)).collect();
            waiting.sort_by_key(|&i| self.backoff[i].1);
            let missing = self.settings.min_servers - ask.len();
            ask.extend(waiting.into_iter().take(missing));
            ask.sort_unstable();
        }
        ask
    }

    fn client_config(&self) -> gnomon_client::Config {
        gnomon_client::Config {
            backoff: Backoff {
                initial: self.settings.timeout,
                attempts: self.settings.retries,
                ..Backoff::QUERY
            },
            tcp: TcpMode::Fallback,
            ..gnomon_client::Config::default()
        }
    }

    fn excluded_key(&self, i: usize) -> bool {
        let key = B64.encode(self.list.servers[i].public_key.bytes());
        self.state.excluded.iter().any(|e| e.public_key == key)
    }

    /// One round: measure, decide, save, report, log, sinks.
    pub fn round(&mut self) -> Result<Outcome, QueryError> {
        self.poll_refresh();
        self.poll_signed();
        let ask = self.choose();
        let excluded: Vec<bool> = (0..self.list.servers.len())
            .map(|i| self.excluded_key(i))
            .collect();
        // The whole list's assumption, whoever is asked: a server backing
        // off is as silent as one an attacker drops.
        let bar = round::Bar {
            assumption: Electorate::of(&self.list.servers).assume(self.settings.max_liars),
            quorum: self.settings.quorum,
            max_radius_us: self.settings.max_radius.as_micros() as i128,
        };
        let mut round = round::run(
            self.client_config(),
            &self.list.servers,
            &ask,
            &|i| excluded[i],
            bar,
        )?;
        self.round_no += 1;
        if self.list.servers.is_empty() {
            // No server because too few signed lists are in force: the
            // round says why, not only that nobody answered.
            if let Some(why) = self.signed.as_ref().and_then(|s| s.shortfall()) {
                round.why_none = Some(why);
            }
        }
        let servers = self.list.servers.clone();
        let name = |i: usize| servers[i].name.clone();

        // Backoff for the silent, forgiveness for the rest.
        for &i in &ask {
            let b = &mut self.backoff[i];
            if round.unreachable.iter().any(|u| u.0 == i) {
                b.0 = b.0.saturating_add(1);
                b.1 = self.round_no + (1u64 << (b.0 - 1).min(MAX_BACKOFF_SHIFT)) - 1;
            } else {
                *b = (0, 0);
            }
        }
        // Those backing off were not asked, and are unreachable all the
        // same: the log, the state and the gauge keep showing them.
        for (i, &(_, due)) in self.backoff.iter().enumerate() {
            if !ask.contains(&i) {
                let why = format!("backing off until round {}", due + 1);
                round.unreachable.push((i, why));
            }
        }
        round.unreachable.sort_by_key(|u| u.0);
        // Liars out, the reformed back in.
        let now_us = round.local_end_us;
        for &(i, _) in &round.outside {
            let key = B64.encode(servers[i].public_key.bytes());
            if !self.state.excluded.iter().any(|e| e.public_key == key) {
                self.state.excluded.push(Excluded {
                    name: name(i),
                    public_key: key,
                    since_us: now_us as i64,
                });
            }
        }
        for &i in &round.rejoined {
            let key = B64.encode(servers[i].public_key.bytes());
            self.state.excluded.retain(|e| e.public_key != key);
        }

        // Held until the state is saved: a floor the operator cleared
        // meanwhile is taken here and not written back (state::floor).
        let lock = floor::guard(&self.store, &mut self.state, &*self.log);
        let floor_before_us = self.state.floor_us.map(i128::from);
        let mut warnings = Vec::new();
        // The floor and the anchor rest on one bar: a consensus that
        // exists and the quorum agrees on. However wide: a wide consensus
        // is a weaker bound, not a wrong one (max-radius only bounds what
        // may steer the clock).
        let proof = round.consensus.as_ref().filter(|_| round.quorum_met);
        // What the quorum proved of the true time judges the signed
        // lists' expiry from now on, however far behind the local clock.
        if let (Some(s), Some(c)) = (self.signed.as_mut(), proof) {
            s.proven_at_least(now_us + c.low_us, round.ended);
        }
        let mut raised = false;
        if let Some(e) = proof.and(round.evidence()) {
            if below_floor(floor_before_us, &e, now_us) {
                self.metrics.floor_contradiction();
                let f = floor_before_us.unwrap_or_default();
                let utc = |us: i128| format_utc(us.max(0) as u64);
                warnings.push(format!(
                    "round {}: the consensus [{}, {}] lies wholly below the proven floor {}{}: \
                     the servers agree on a time this machine proved has passed, so the round or \
                     the floor is wrong; the now socket answers \"contradiction\" (if the floor \
                     is wrong: gnomon sync --clear-floor)",
                    self.round_no,
                    utc(now_us + e.low_us),
                    utc(now_us + e.high_us),
                    utc(f),
                    self.state
                        .floor_proven_at_us
                        .map_or(String::new(), |p| format!(
                            " (proven at {})",
                            utc(i128::from(p))
                        )),
                ));
            }
            let new = raise_floor(floor_before_us, &e, now_us);
            if floor_before_us != Some(new) {
                self.state.floor_us = Some(new as i64);
                self.state.floor_proven_at_us = Some(now_us as i64);
                raised = true;
            }
        }

        // A contradiction in the chain proves that one of its two signers
        // lied, not which: the report carries the whole chain and names
        // nobody. It is made when a pair in it involves no server marked
        // before (a marked liar contradicting again was reported when it
        // was caught).
        let fresh_lie = round
            .sequence
            .contradicting_servers()
            .iter()
            .any(|&(a, b)| !excluded[round.asked[a]] && !excluded[round.asked[b]]);
        let report_file = round.report.as_ref().filter(|_| fresh_lie).and_then(|r| {
            let body = r.to_json();
            let file = format!("{}/report-{}.json", state::REPORTS_DIR, now_us);
            match self.store.write(&file, body.as_bytes()) {
                Ok(p) => {
                    self.send_report(body);
                    Some(p)
                }
                Err(e) => {
                    warnings.push(format!("cannot write the report: {e}"));
                    self.send_report(body);
                    None
                }
            }
        });

        let outside_because: Vec<(String, &str)> = round
            .outside
            .iter()
            .map(|&(i, f)| (name(i), flag_words(f)))
            .chain(
                round
                    .still_out
                    .iter()
                    .map(|&i| (name(i), "marked, still outside")),
            )
            .collect();
        // The log line's words: each name with its reason.
        let outside: Vec<String> = outside_because
            .iter()
            .map(|(n, why)| format!("{n} ({why})"))
            .collect();
        let not_asked: Vec<(String, String)> = round
            .unreachable
            .iter()
            .filter(|(i, _)| !round.asked.contains(i))
            .map(|(i, why)| (name(*i), why.to_string()))
            .collect();
        let c = round.consensus.as_ref();
        self.state.last = Some(LastRound {
            at_us: now_us as i64,
            ok: round.quorum_met,
            offset_low_us: c.map(|c| c.low_us as i64),
            offset_high_us: c.map(|c| c.high_us as i64),
            agreeing: c
                .map(|c| c.agreeing.iter().map(|&i| name(i)).collect())
                .unwrap_or_default(),
            outside: outside_because.iter().map(|(n, _)| n.clone()).collect(),
            unreachable: round.unreachable.iter().map(|(i, _)| name(*i)).collect(),
            outside_because: outside_because
                .into_iter()
                .map(|(n, why)| (n, why.to_owned()))
                .collect(),
            unreachable_because: not_asked.into_iter().collect(),
            report: report_file.as_ref().map(|p| p.display().to_string()),
            assumption: Some(describe_assumption(round.assumption, round.answered)),
            no_consensus: round.why_none.clone(),
        });
        // The anchor: the consensus's interval for true time at the end
        // of the round (local_end_us is the local clock at `round.ended`,
        // as the client placed the answers), pinned to the clocks read now
        // (crate::now: the moment since the round's end widens it).
        let reading = self.board.read();
        let anchor = proof.map(|c| {
            Anchor::pin(
                reading,
                round.ended_boot_ns,
                (now_us + c.low_us, now_us + c.high_us),
                self.round_no,
                c.agreeing.iter().map(|&i| name(i)).collect(),
                describe_assumption(round.assumption, round.answered),
            )
        });
        self.board
            .update(anchor, board_floor(&self.state, raised.then_some(reading)));
        if let Err(e) = self.store.save(&self.state) {
            warnings.push(format!("cannot save the state: {e}"));
        }
        drop(lock);
        if let Err(e) = self
            .store
            .write(state::CHAIN_FILE, round.chain.to_json().as_bytes())
        {
            warnings.push(format!("cannot save the chain: {e}"));
        }

        // Before the line is logged: whoever reads the log and then
        // scrapes sees this round counted.
        if let Some(s) = self.signed.as_mut() {
            self.metrics.set_signed(s.report(&self.store, &self.log));
        }
        self.metrics.record_round(&round, self.list.servers.len());
        let line = self.summary(&round, &outside, report_file.as_ref());
        if self.log_rounds {
            (self.log)(&line);
        }
        for w in warnings {
            (self.log)(&format!("warning: {w}"));
        }
        for sink in &mut self.sinks {
            if let Err(e) = sink.round(&round, &self.list.servers) {
                (self.log)(&format!("{}: {e}", sink.name()));
            }
        }
        Ok(Outcome {
            round,
            floor_before_us,
            report_file,
            line,
        })
    }
}
