//! `gnomon._native`: the Rust half of the `gnomon` Python package.
//!
//! Everything here returns plain values (bytes, ints, strings, tuples and
//! dicts); `python/gnomon/__init__.py` turns them into typed dataclasses and
//! datetimes. Failures are raised as the classes of `gnomon._errors`, so the
//! exception types are ordinary Python classes with attributes.
//!
//! No input from Python reaches a panic: byte strings are parsed by the
//! protocol crate (fuzzed, `Result` everywhere), keys and version names are
//! checked here first. Network calls run on a thread of their own while
//! the caller waits detached from the interpreter (`Python::detach`) in
//! slices, checking for signals between them: other Python threads run
//! meanwhile, and Ctrl-C raises `KeyboardInterrupt` within a slice.

use std::time::Duration;

use gnomon_client::{
    describe_verify_error, parse_public_key, Client, Config, Electorate, Entropy, OsEntropy, Plan,
    QueryError, Rejection, Selection, Server, TcpMode,
};
use gnomon_protocol::request::{srv_for, DEFAULT_REQUEST_SIZE};
use gnomon_protocol::{
    parse_report, LongTermKey, Offer, Profile, ProfileSet, ServerList, VerifyError, PROFILES,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString};

mod convert;

use convert::{answer_dict, invalid_reason, raise, verified_dict};

/// Longest nonce of any version (Google's 64 bytes).
const MAX_NONCE: usize = gnomon_protocol::chain::MAX_NONCE_LEN;

/// A public key given as base64 (or hex) text or as raw bytes: 32 for
/// Ed25519, 1312 for ML-DSA-44.
fn public_key(obj: &Bound<'_, PyAny>) -> PyResult<LongTermKey> {
    if let Ok(s) = obj.cast::<PyString>() {
        let text = s.to_cow()?;
        return parse_public_key(&text)
            .map_err(|e| PyValueError::new_err(format!("public key: {e}")));
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        let raw = b.as_bytes();
        return LongTermKey::from_bytes(raw).ok_or_else(|| {
            PyValueError::new_err(format!(
                "public key: {} bytes; Ed25519 public keys have 32, ML-DSA-44 ones 1312",
                raw.len()
            ))
        });
    }
    Err(PyTypeError::new_err(
        "public key: expected base64 text (str) or 32 bytes",
    ))
}

/// A version by name (`"rfc-10049"`, `"draft-08"`, `"google"`), by number
/// (`1`, `0x8000000b`) or as a number in text.
fn profile(obj: &Bound<'_, PyAny>) -> PyResult<&'static Profile> {
    let name = if let Ok(s) = obj.cast::<PyString>() {
        s.to_cow()?.into_owned()
    } else if obj.is_instance_of::<PyInt>() {
        match obj.extract::<u32>() {
            Ok(n) => n.to_string(),
            Err(_) => {
                return Err(PyValueError::new_err(
                    "version: not a 32-bit version number",
                ))
            }
        }
    } else {
        return Err(PyTypeError::new_err(
            "version: expected a name such as \"rfc-10049\" or a wire number such as 0x8000000c",
        ));
    };
    Profile::by_name(&name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "version {name:?} is not one gnomon knows (gnomon.versions() lists them)"
        ))
    })
}

/// An integer argument in `lo..=hi`: another type is a TypeError, any
/// integer outside the range (however large) a ValueError.
fn int_in(obj: &Bound<'_, PyAny>, what: &str, lo: usize, hi: usize) -> PyResult<usize> {
    if !obj.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!("{what}: expected an int")));
    }
    obj.extract::<i64>()
        .ok()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| PyValueError::new_err(format!("{what}: an integer in {lo}..={hi}")))
}

fn tcp_mode(tcp: Option<bool>) -> TcpMode {
    match tcp {
        None => TcpMode::Fallback,
        Some(true) => TcpMode::Only,
        Some(false) => TcpMode::Never,
    }
}

fn config(timeout: f64, tcp: Option<bool>) -> PyResult<Config> {
    let timeout = Duration::try_from_secs_f64(timeout)
        .ok()
        .filter(|t| !t.is_zero() && *t <= Duration::from_secs(86_400))
        .ok_or_else(|| PyValueError::new_err("timeout: seconds in (0, 86400]"))?;
    Ok(Config {
        tcp: tcp_mode(tcp),
        deadline: Some(timeout),
        ..Config::default()
    })
}

/// How long the caller waits, detached, before it looks for a signal.
const SIGNAL_SLICE: Duration = Duration::from_millis(50);

/// Run `work` on a thread of its own and wait for it in slices of
/// [`SIGNAL_SLICE`], detached from the interpreter, checking for signals
/// between them: a blocking query would otherwise hold Ctrl-C until its
/// deadline. An interrupted call returns the signal's exception at once;
/// its thread ends by itself within the query's own deadline, and its
/// result is dropped.
fn interruptible<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("gnomon-query".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("cannot start a thread: {e}")))?;
    let mut rx = rx;
    loop {
        // The receiver goes into the detached closure and comes back: it
        // is Send, not Sync.
        let (got, back) = py.detach(move || (rx.recv_timeout(SIGNAL_SLICE), rx));
        rx = back;
        match got {
            Ok(v) => return Ok(v),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(
                    "the query's thread ended without an answer",
                ))
            }
        }
    }
}

/// The known versions: (name, wire number), oldest first.
#[pyfunction]
fn versions() -> Vec<(&'static str, u32)> {
    PROFILES.iter().map(|p| (p.name, p.version.0)).collect()
}

/// A request for `version`, with `nonce` (random when `None`) and, when
/// `public_key` is given and the version defines it, SRV naming that key.
#[pyfunction]
#[pyo3(signature = (version, nonce=None, public_key=None, size=None))]
fn build_request<'py>(
    py: Python<'py>,
    version: &Bound<'py, PyAny>,
    nonce: Option<&Bound<'py, PyBytes>>,
    public_key: Option<&Bound<'py, PyAny>>,
    size: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    #[cfg(feature = "test-panic")]
    if std::env::var_os("GNOMON_TEST_PANIC").is_some() {
        panic!("GNOMON_TEST_PANIC is set: a stand-in for a bug");
    }
    let p = profile(version)?;
    let mut fresh = [0u8; MAX_NONCE];
    let nonce: &[u8] = match nonce {
        Some(n) => n.as_bytes(),
        None => {
            let out = &mut fresh[..p.nonce_len];
            OsEntropy
                .fill(out)
                .map_err(|e| PyErr::new::<pyo3::exceptions::PyOSError, _>(e.to_string()))?;
            out
        }
    };
    if nonce.len() != p.nonce_len {
        return Err(PyValueError::new_err(format!(
            "nonce: {} bytes; {} uses {}",
            nonce.len(),
            p.name,
            p.nonce_len
        )));
    }
    let srv = public_key.map(|k| public_key_srv(k)).transpose()?;
    let size = match size {
        Some(s) => int_in(s, "size", 0, 65_536)?,
        None => DEFAULT_REQUEST_SIZE,
    };
    let mut out = vec![0u8; size];
    let len = Offer::single(p)
        .build(nonce, srv.as_ref(), size, &mut out)
        .map_err(|e| {
            PyValueError::new_err(format!(
                "cannot build a {size}-byte {} request ({e:?}): the size must be a multiple of 4 and hold the message",
                p.name
            ))
        })?;
    Ok(PyBytes::new(py, &out[..len]))
}

fn public_key_srv(k: &Bound<'_, PyAny>) -> PyResult<[u8; 32]> {
    Ok(srv_for(public_key(k)?.bytes()))
}

/// Verify `response` to `request` against `public_key`.
#[pyfunction]
fn verify<'py>(
    py: Python<'py>,
    request: &Bound<'py, PyBytes>,
    response: &Bound<'py, PyBytes>,
    public_key: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let key = self::public_key(public_key)?;
    match gnomon_protocol::verify_response(request.as_bytes(), response.as_bytes(), &key) {
        Ok(v) => verified_dict(py, &v),
        Err(VerifyError::Request(w)) => Err(PyValueError::new_err(format!(
            "request: not a Roughtime request ({w:?})"
        ))),
        Err(e) => Err(raise(
            py,
            "InvalidAnswer",
            (
                describe_verify_error(&e),
                invalid_reason(&Rejection::Verify(e)),
            ),
        )),
    }
}

/// Ask one server.
#[pyfunction]
#[pyo3(signature = (address, public_key, *, version=None, timeout=2.0, tcp=None))]
fn query<'py>(
    py: Python<'py>,
    address: &str,
    public_key: &Bound<'py, PyAny>,
    version: Option<&Bound<'py, PyAny>>,
    timeout: f64,
    tcp: Option<bool>,
) -> PyResult<Bound<'py, PyDict>> {
    let key = self::public_key(public_key)?;
    let version = version.map(profile).transpose()?;
    check_scheme(&key, version, tcp)?;
    let mut server = Server::at(address, key)
        .map_err(|e| PyValueError::new_err(format!("address {address:?}: {e}")))?;
    if let Some(p) = version {
        server = server.with_version(p);
    }
    let mut client = Client::new(config(timeout, tcp)?);
    let result = interruptible(py, move || client.query(&server))?;
    match result {
        Ok(a) => answer_dict(py, &a),
        Err(e) => Err(query_error(py, &e)),
    }
}

/// A version and transport the key's scheme can be asked in, refused
/// before any packet is sent (as `gnomon query` refuses them): an ML-DSA-44
/// key never verifies an Ed25519 version's answer, and its versions are
/// served over TCP only.
fn check_scheme(key: &LongTermKey, version: Option<&Profile>, tcp: Option<bool>) -> PyResult<()> {
    let scheme = key.scheme();
    if let Some(p) = version {
        if p.scheme != scheme {
            return Err(PyValueError::new_err(format!(
                "version {:?} is signed with {}, but public_key is an {} key ({} bytes)",
                p.name,
                p.scheme,
                scheme,
                key.bytes().len()
            )));
        }
    }
    if tcp == Some(false)
        && ProfileSet::ALL
            .of_scheme(scheme)
            .over_udp()
            .iter()
            .next()
            .is_none()
    {
        return Err(PyValueError::new_err(format!(
            "tcp=False: {scheme} versions are served over TCP only"
        )));
    }
    Ok(())
}

/// The exception for a failed query.
fn query_error(py: Python<'_>, e: &QueryError) -> PyErr {
    match e {
        QueryError::Invalid { rejection, .. } => raise(
            py,
            "InvalidAnswer",
            (e.to_string(), invalid_reason(rejection)),
        ),
        QueryError::Resolve { .. } => raise(py, "NoAnswer", (e.to_string(),)),
        QueryError::NoAnswer { .. } => raise(py, "NoAnswer", (e.to_string(),)),
        _ => PyErr::new::<pyo3::exceptions::PyOSError, _>(e.to_string()),
    }
}

/// Most servers `ask`, distinct servers `quorum` or liars `max_liars`
/// may name.
const MAX_COUNT: usize = 1 << 20;

/// `measure`'s `quorum`: how many distinct servers must agree, as
/// `gnomon sync`'s. Its own type so that `None`, which meant "ask every
/// server" before 0.2.0, is refused with a pointer to `ask`.
struct Quorum(usize);

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
fn measure<'py>(
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
            let name = s.name.clone().unwrap_or_else(|| format!("server #{i}"));
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
fn verify_report<'py>(
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

/// Verify a relayed proof as the device does (docs/PROOF.md): the bundle
/// in either form, the device's value, its pinned keys and the µs its own
/// clock says have passed. The interval as a dict; a failure raises
/// `gnomon._errors.ProofError` with the CLI's kind. A device value of a
/// length no bundle may carry (the protocol's `check_device_value`: 16 to
/// 64 bytes) is a `ValueError`, before the bundle is read.
///
/// The assumption is about the pinned servers: at most `max_liars` of
/// them lie (`None`: fewer than half). `servers`, when given, is one
/// label per key: keys with one label are one server (one voter), and so
/// are equal keys; without it each distinct key is a server of its own.
#[pyfunction]
#[pyo3(signature = (bundle, device, keys, elapsed_us, quorum, max_liars, max_radius_us, servers=None))]
#[allow(clippy::too_many_arguments)]
fn verify_proof<'py>(
    py: Python<'py>,
    bundle: &Bound<'py, PyBytes>,
    device: &Bound<'py, PyBytes>,
    keys: &Bound<'py, PyList>,
    elapsed_us: u64,
    quorum: usize,
    max_liars: Option<usize>,
    max_radius_us: Option<u64>,
    servers: Option<Vec<usize>>,
) -> PyResult<Bound<'py, PyDict>> {
    use gnomon_protocol::proof::{self, ProofError, ProofPolicy, ProofWorkspace};
    if let Err(e) = proof::check_device_value(device.as_bytes()) {
        return Err(PyValueError::new_err(format!("device: {e}")));
    }
    if quorum == 0 {
        return Err(PyValueError::new_err("quorum must be at least 1"));
    }
    let pinned = keys
        .iter()
        .map(|k| public_key(&k))
        .collect::<PyResult<Vec<LongTermKey>>>()?;
    if pinned.is_empty() {
        return Err(PyValueError::new_err("keys: at least one pinned key"));
    }
    if let Some(s) = servers.as_ref().filter(|s| s.len() != pinned.len()) {
        return Err(PyValueError::new_err(format!(
            "servers: {} label(s) for {} key(s); one per key",
            s.len(),
            pinned.len()
        )));
    }
    let voter_of = voters(&pinned, servers.as_deref());
    let n_voters = voter_of
        .iter()
        .enumerate()
        .filter(|&(i, &v)| v == i)
        .count();
    let bytes = bundle.as_bytes();
    // The binary form starts with its magic; anything else is read as the
    // JSON form and turned into the binary one, which the verifier reads.
    let converted;
    let binary = if bytes.starts_with(&proof::PROOF_MAGIC) {
        bytes
    } else {
        match proof::Proof::from_json(bytes) {
            Ok(p) => {
                converted = p.to_binary();
                &converted[..]
            }
            // The JSON form's D out of bounds: the binary form's refusal.
            Err(proof::ProofFormError::DeviceLength(n)) => {
                let e = ProofError::DeviceValueLength(n);
                let none = py.None();
                return Err(raise(
                    py,
                    "ProofError",
                    (
                        e.to_string(),
                        convert::proof_kind(&e),
                        none.clone_ref(py),
                        none,
                    ),
                ));
            }
            Err(e) => {
                let none = py.None();
                return Err(raise(
                    py,
                    "ProofError",
                    (
                        format!("neither a binary bundle nor its JSON form: {e:?}"),
                        "malformed",
                        none.clone_ref(py),
                        none,
                    ),
                ));
            }
        }
    };
    let keys: Vec<_> = pinned.iter().map(LongTermKey::as_public).collect();
    let policy = ProofPolicy {
        max_liars,
        quorum,
        max_radius_us,
    };
    let assumption = policy.assumption(n_voters);
    let mut ws = Box::new(ProofWorkspace::new());
    match proof::verify_proof_grouped(
        binary,
        device.as_bytes(),
        &keys,
        &voter_of,
        elapsed_us,
        &policy,
        &mut ws,
    ) {
        Ok(p) => convert::proven_dict(py, &p),
        Err(e) => {
            let entry = match e {
                ProofError::UnknownKey(i)
                | ProofError::Signature(i)
                | ProofError::NotForRequest(i)
                | ProofError::Response(i, _)
                | ProofError::Link(i) => Some(i),
                ProofError::Contradiction { earlier, .. } => Some(earlier),
                _ => None,
            };
            let majority = match e {
                ProofError::Contradiction { majority, .. } | ProofError::Liar { majority, .. } => {
                    majority
                }
                _ => None,
            };
            let majority = match majority {
                Some(m) => convert::proven_dict(py, &m)?.into_any(),
                None => py.None().into_bound(py),
            };
            let answered = match e {
                ProofError::TooFewKeys { present, .. } => Some(present),
                _ => None,
            };
            let assumption = convert::pinned_assumption(assumption, answered);
            Err(raise(
                py,
                "ProofError",
                (
                    format!("{e} ({assumption})"),
                    convert::proof_kind(&e),
                    entry,
                    majority,
                    assumption,
                ),
            ))
        }
    }
}

/// The voter of each pinned key: keys with one label in `servers` are
/// one, and so are equal keys (closed transitively); each voter is
/// numbered by its first key, so `voter_of[i] == i` for exactly one key
/// of each.
fn voters(keys: &[LongTermKey], servers: Option<&[usize]>) -> Vec<usize> {
    let n = keys.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &[usize], mut i: usize) -> usize {
        while parent[i] != i {
            i = parent[i];
        }
        i
    }
    for j in 0..n {
        for i in 0..j {
            let one_server = servers.is_some_and(|s| s[i] == s[j]);
            if one_server || keys[i].bytes() == keys[j].bytes() {
                let (a, b) = (root(&parent, i), root(&parent, j));
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    (0..n).map(|i| root(&parent, i)).collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(versions, m)?)?;
    m.add_function(wrap_pyfunction!(build_request, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(query, m)?)?;
    m.add_function(wrap_pyfunction!(measure, m)?)?;
    m.add_function(wrap_pyfunction!(verify_report, m)?)?;
    m.add_function(wrap_pyfunction!(verify_proof, m)?)?;
    Ok(())
}
