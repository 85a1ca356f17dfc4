//! The measurement sequence over a server list, and the check of the
//! malfeasance report it leaves when the answers prove a contradiction.

use gnomon_client::{Client, Electorate, Plan, Selection, Server};
use gnomon_protocol::{parse_report, ServerList};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::args::{config, int_in};
use crate::blocking::interruptible;
use crate::convert::{self, query_error};

/// Most servers `ask`, distinct servers `quorum` or liars `max_liars`
/// may name.
const MAX_COUNT: usize = 1 << 20;

/// `measure`'s `quorum`: how many distinct servers must agree, as
/// `gnomon sync`'s. Its own type so that `None`, which meant "ask every
/// server" before 0.2.0, is refused with a pointer to `ask`.
pub(crate) struct Quorum(usize);

impl<'a, 'py> FromPyObject<'a, 'py> for Quorum {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if obj.is_none() {
            return Err(PyTypeError::new_err(
                "quorum: expected an int, how many distinct servers must agree (2 by default); \
                 to ask every server, leave ask=None (before 0.2.0, quorum was how many servers to ask)",
            ));
        }
        int_in(&obj, "quorum", 1, MAX_COUNT).map(Quorum)
    }
}

/// Servers the RFC's measurement sequence asks for at least.
const MIN_SERVERS: usize = 3;

/// The measurement sequence over a server list (JSON bytes): `ask`
/// servers at random, twice, chained; the quorum rule over their answers
/// under "at most `max_liars` of the list's servers lie" (`None`: the
/// default for the list), and whether `quorum` distinct servers agree.
/// `ask=None` asks enough to outvote f liars with f more silenced
/// (3f + 1, at least 3), or every server when some are one (as `gnomon
/// query --servers` does).
#[pyfunction]
#[pyo3(
    signature = (server_list, *, ask=None, quorum=Quorum(2), max_liars=None, timeout=2.0, tcp=None),
    text_signature = "(server_list, *, ask=None, quorum=2, max_liars=None, timeout=2.0, tcp=None)"
)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn measure<'py>(
    py: Python<'py>,
    server_list: &Bound<'py, PyBytes>,
    ask: Option<&Bound<'py, PyAny>>,
    quorum: Quorum,
    max_liars: Option<&Bound<'py, PyAny>>,
    timeout: f64,
    tcp: Option<bool>,
) -> PyResult<Bound<'py, PyDict>> {
    let list = ServerList::parse(server_list.as_bytes())
        .map_err(|e| PyValueError::new_err(format!("server list: {e:?}")))?;
    let servers = Server::from_list(&list);
    let skipped: Vec<String> = list
        .servers
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let why = s.status.as_ref().err()?;
            let name = s.name.clone().unwrap_or_else(|| format!("entry {}", i + 1));
            Some(format!("{name}: {why:?}"))
        })
        .collect();
    if servers.is_empty() {
        return Err(PyValueError::new_err("server list: no usable server"));
    }
    let ask = ask.map(|k| int_in(k, "ask", 1, MAX_COUNT)).transpose()?;
    let max_liars = max_liars
        .map(|f| int_in(f, "max_liars", 0, MAX_COUNT))
        .transpose()?;
    let Quorum(quorum) = quorum;
    // One voter per server, however many identities it has; the
    // assumption is about the list, never about who answers.
    let electorate = Electorate::of(&servers);
    let assumption = electorate.assume(max_liars);
    // A quorum or an ask that can never be met is a mistake in the call:
    // say so before asking anyone.
    if quorum > electorate.voters() {
        return Err(PyValueError::new_err(format!(
            "quorum {quorum}: the list's usable servers are {} distinct server(s) (those \
             sharing a key, address or operator are one), so {quorum} can never agree",
            electorate.voters()
        )));
    }
    if let Some(k) = ask.filter(|&k| quorum > k) {
        return Err(PyValueError::new_err(format!(
            "quorum {quorum} is more than ask={k}: {k} server(s) can never make {quorum} distinct servers"
        )));
    }
    if let Some(k) = ask.filter(|&k| k.min(servers.len()) < assumption.needed()) {
        return Err(PyValueError::new_err(format!(
            "ask={k}: {} distinct servers must answer to outvote {} liar(s) (the assumption: \
             at most {} of the {} listed lie); ask more, leave ask=None, or pass a lower max_liars",
            assumption.needed(),
            assumption.liars,
            assumption.liars,
            assumption.voters
        )));
    }
    // Enough to outvote f liars with f more silenced (3f + 1 voters), and
    // every server when some are one voter.
    let enough = if electorate.voters() < servers.len() {
        servers.len()
    } else {
        (3 * assumption.liars + 1).max(MIN_SERVERS)
    };
    let plan = Plan {
        selection: Selection::Random(ask.unwrap_or(enough)),
        passes: 2,
        assumption: Some(assumption),
    };
    let mut client = Client::new(config(timeout, tcp)?);
    let servers_ = servers.clone();
    let seq = interruptible(py, move || client.measure(&servers_, &plan))?
        .map_err(|e| query_error(py, &e))?;
    let out = convert::sequence_dict(py, &servers, &seq, quorum)?;
    out.set_item("skipped", PyList::new(py, skipped)?)?;
    Ok(out)
}

/// Check a malfeasance report (JSON text or bytes).
#[pyfunction]
pub(crate) fn verify_report<'py>(
    py: Python<'py>,
    report: &Bound<'py, PyBytes>,
) -> PyResult<Bound<'py, PyDict>> {
    let parsed = parse_report(report.as_bytes())
        .map_err(|e| PyValueError::new_err(format!("report: {e:?}")))?;
    let check = parsed.verify().map_err(|_| {
        PyValueError::new_err(
            "report: the pre-draft-12 form names no keys and holds no requests; it cannot be verified",
        )
    })?;
    convert::report_dict(py, &check)
}
