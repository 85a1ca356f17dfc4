//! Who votes: one voter per server, however many identities it has.
//!
//! A machine that serves an Ed25519 and an ML-DSA-44 identity on one port
//! (the layout docs/PQ.md recommends) is one server, and one server that
//! lies must not count twice. Two list entries are one voter when they
//! share a long-term key, an address (`host:port`, whatever the transport:
//! UDP and TCP on one port are one machine), or a non-empty `operator`
//! (the list says they are run by one party, so they fail or lie
//! together). The relation is closed transitively: a shares an address
//! with b, b a key with c, so a, b and c are one voter.
//!
//! Grouping only ever merges, so it can only lower the count of voters:
//! it never lets one machine outvote another, and a machine whose
//! identities contradict each other proves its own malfeasance (their
//! intervals are intersected, and an empty intersection is a proven lie).

use gnomon_protocol::quorum::Assumption;

use crate::server::{format_address, Server};

/// Why two servers are one voter, for output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bond {
    /// The same long-term key.
    Key,
    /// The same `host:port`.
    Address,
    /// The same `operator` in the list.
    Operator,
}

impl Bond {
    /// The word output uses.
    pub fn word(self) -> &'static str {
        match self {
            Bond::Key => "key",
            Bond::Address => "address",
            Bond::Operator => "operator",
        }
    }
}

/// What identifies one server: enough to tell which are one machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The long-term public key's bytes.
    pub key: Vec<u8>,
    /// `host:port` of every address, lower case (the transport left out).
    pub addresses: Vec<String>,
    /// Who runs it, if the list says.
    pub operator: Option<String>,
}

impl Identity {
    /// The identity of a listed server.
    pub fn of(server: &Server) -> Identity {
        let mut addresses: Vec<String> = server
            .addresses
            .iter()
            .map(|a| format_address(&a.host, a.port).to_ascii_lowercase())
            .collect();
        addresses.sort_unstable();
        addresses.dedup();
        Identity {
            key: server.public_key.bytes().to_vec(),
            addresses,
            operator: server
                .operator
                .as_deref()
                .map(str::trim)
                .filter(|o| !o.is_empty())
                .map(str::to_owned),
        }
    }

    /// Why `self` and `other` are one server, if they are (the first
    /// reason found, in the order key, address, operator).
    fn bond(&self, other: &Identity) -> Option<Bond> {
        if self.key == other.key {
            return Some(Bond::Key);
        }
        if self.addresses.iter().any(|a| other.addresses.contains(a)) {
            return Some(Bond::Address);
        }
        match (&self.operator, &other.operator) {
            (Some(a), Some(b)) if a == b => Some(Bond::Operator),
            _ => None,
        }
    }
}

/// The voters of a list of servers (ids are positions in it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Electorate {
    /// The voter of each server.
    voter_of: Vec<usize>,
    /// The servers of each voter, ascending.
    members: Vec<Vec<usize>>,
    /// The bonds that merged two groups: (lower id, higher id, why); a
    /// spanning forest, at most one fewer than the servers.
    bonds: Vec<(usize, usize, Bond)>,
}

impl Electorate {
    /// The voters of `identities` (server `i` is the `i`-th).
    pub fn new(identities: &[Identity]) -> Electorate {
        let n = identities.len();
        let mut parent: Vec<usize> = (0..n).collect();
        fn root(parent: &mut [usize], mut i: usize) -> usize {
            while parent[i] != i {
                parent[i] = parent[parent[i]];
                i = parent[i];
            }
            i
        }
        let mut bonds = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                if let Some(b) = identities[i].bond(&identities[j]) {
                    // Only the bonds that join two groups are kept: at most
                    // n − 1 of them, however a hostile list bonds its
                    // entries (every pair sharing one operator is n²/2).
                    let (ri, rj) = (root(&mut parent, i), root(&mut parent, j));
                    if ri != rj {
                        parent[ri.max(rj)] = ri.min(rj);
                        bonds.push((i, j, b));
                    }
                }
            }
        }
        // Voters numbered in the order of their first server.
        let mut voter_of = vec![usize::MAX; n];
        let mut members: Vec<Vec<usize>> = Vec::new();
        for i in 0..n {
            let r = root(&mut parent, i);
            if voter_of[r] == usize::MAX {
                voter_of[r] = members.len();
                members.push(Vec::new());
            }
            voter_of[i] = voter_of[r];
            members[voter_of[i]].push(i);
        }
        Electorate {
            voter_of,
            members,
            bonds,
        }
    }

    /// The voters of a list of servers.
    pub fn of(servers: &[Server]) -> Electorate {
        let ids: Vec<Identity> = servers.iter().map(Identity::of).collect();
        Electorate::new(&ids)
    }

    /// One voter per server: for callers that group nothing (tests, a
    /// single server).
    pub fn each_alone(servers: usize) -> Electorate {
        Electorate {
            voter_of: (0..servers).collect(),
            members: (0..servers).map(|i| vec![i]).collect(),
            bonds: Vec::new(),
        }
    }

    /// How many servers.
    pub fn servers(&self) -> usize {
        self.voter_of.len()
    }

    /// How many voters.
    pub fn voters(&self) -> usize {
        self.members.len()
    }

    /// The voter of server `server`; `None` when it is not in the list.
    pub fn voter_of(&self, server: usize) -> Option<usize> {
        self.voter_of.get(server).copied()
    }

    /// The servers of voter `voter`, ascending.
    pub fn members(&self, voter: usize) -> &[usize] {
        self.members.get(voter).map_or(&[], Vec::as_slice)
    }

    /// Every voter of more than one server: its servers, ascending.
    pub fn grouped(&self) -> Vec<Vec<usize>> {
        self.members
            .iter()
            .filter(|m| m.len() > 1)
            .cloned()
            .collect()
    }

    /// Why servers were merged: (lower id, higher id, bond) for each bond
    /// that joined two groups (a spanning forest of the groups).
    pub fn bonds(&self) -> &[(usize, usize, Bond)] {
        &self.bonds
    }

    /// Why the servers of `group` are one voter, in words: "shared
    /// address", "shared key and operator".
    pub fn why_grouped(&self, group: &[usize]) -> String {
        let mut kinds: Vec<Bond> = self
            .bonds
            .iter()
            .filter(|(a, b, _)| group.contains(a) && group.contains(b))
            .map(|b| b.2)
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        let words: Vec<&str> = kinds.iter().map(|b| b.word()).collect();
        format!("shared {}", words.join(" and "))
    }

    /// The assumption for this list: at most `max_liars` of its voters
    /// lie, or the default for a client's list
    /// ([`Assumption::for_list`]).
    pub fn assume(&self, max_liars: Option<usize>) -> Assumption {
        match max_liars {
            Some(f) => Assumption::new(self.voters(), f),
            None => Assumption::for_list(self.voters()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(key: &str, addresses: &[&str], operator: Option<&str>) -> Identity {
        Identity {
            key: key.as_bytes().to_vec(),
            addresses: addresses.iter().map(|a| a.to_string()).collect(),
            operator: operator.map(str::to_owned),
        }
    }

    #[test]
    fn a_key_an_address_or_an_operator_makes_one_voter_and_it_is_transitive() {
        let e = Electorate::new(&[
            id("ed", &["m:2002"], None),
            id("pq", &["m:2002"], None),
            id("b", &["b:1"], None),
            id("c", &["c:1"], Some("acme")),
            id("d", &["d:1"], Some("acme")),
            id("b", &["b2:1"], None),
            id("e", &["e:1"], None),
            id("f", &["d:1", "f:1"], None),
        ]);
        assert_eq!(e.voters(), 4);
        assert_eq!(e.grouped(), [vec![0, 1], vec![2, 5], vec![3, 4, 7]]);
        assert_eq!(e.voter_of(6), Some(3));
        assert_eq!(e.voter_of(8), None);
        assert!(e.bonds().contains(&(0, 1, Bond::Address)));
        assert!(e.bonds().contains(&(2, 5, Bond::Key)));
        assert!(e.bonds().contains(&(3, 4, Bond::Operator)));
        assert!(e.bonds().contains(&(4, 7, Bond::Address)));
        assert_eq!(e.why_grouped(&[3, 4, 7]), "shared address and operator");
        assert_eq!(e.why_grouped(&[0, 1]), "shared address");
        assert_eq!(e.assume(None), Assumption::new(4, 1));
        assert_eq!(e.assume(Some(0)), Assumption::new(4, 0));
    }

    #[test]
    fn a_list_of_one_operator_keeps_one_bond_per_joined_server() {
        // A hostile list of 300 entries of one operator bonds every pair
        // (44,850 of them); only the 299 that join keep memory.
        let ids: Vec<Identity> = (0..300)
            .map(|i| id(&format!("k{i}"), &[&format!("h{i}:1")], Some("one")))
            .collect();
        let e = Electorate::new(&ids);
        assert_eq!(e.voters(), 1);
        assert_eq!(e.bonds().len(), 299);
        assert_eq!(e.why_grouped(e.members(0)), "shared operator");
    }

    #[test]
    fn distinct_servers_stay_distinct() {
        let e = Electorate::new(&[
            id("a", &["127.0.0.1:1"], None),
            id("b", &["127.0.0.1:2"], Some("")),
            id("c", &["127.0.0.1:3"], None),
        ]);
        assert_eq!(e.voters(), 3);
        assert!(e.grouped().is_empty());
        assert_eq!(e, {
            let mut alone = Electorate::each_alone(3);
            alone.bonds.clear();
            alone
        });
    }
}
