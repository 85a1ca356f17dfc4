//! The server list `relay` asks and `verify-proof` pins, read once for
//! both: a file that cannot be read, is not a list, holds no servers or
//! none usable is refused with what is wrong in words (never an errno, and
//! never an empty pair of parentheses for an empty list).

use std::path::Path;

use gnomon_client::Server;
use gnomon_protocol::ServerList;

use crate::words;

/// The usable servers of the list at `path`, or why there are none.
pub(crate) fn load(path: &Path) -> Result<Vec<Server>, String> {
    let shown = path.display();
    let raw = std::fs::read(path)
        .map_err(|e| format!("cannot read the server list {shown}: {}", words::io(&e)))?;
    usable(&raw, &shown.to_string())
}

/// The usable servers of the list `raw`, named `shown` in messages (a
/// file, or the monitors' merged signed lists), or why there are none.
pub(crate) fn usable(raw: &[u8], shown: &str) -> Result<Vec<Server>, String> {
    let list = ServerList::parse(raw).map_err(|e| format!("{shown}: not a server list: {e}"))?;
    if list.servers.is_empty() {
        return Err(format!(
            "{shown}: the list has no servers (its `servers` array is empty)"
        ));
    }
    let servers = Server::from_list(&list);
    if servers.is_empty() {
        let why: Vec<String> = list
            .servers
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let name = s
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("server {}", i + 1));
                s.status.as_ref().err().map(|why| format!("{name}: {why}"))
            })
            .collect();
        return Err(format!(
            "{shown}: none of the list's {} servers is usable ({})",
            list.servers.len(),
            why.join("; ")
        ));
    }
    Ok(servers)
}
