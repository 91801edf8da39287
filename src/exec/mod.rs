//! External subjects: any program (a Python/PyTorch/Triton kernel, a C++
//! binary) that speaks the protocol of `docs/protocol.md` on its stdin and
//! stdout is judged like a compiled-in subject: every property, generator,
//! shrinker and the corpus. `--subject exec:<command>` names one on the
//! command line; `bitparity.toml` names them for a project ([`config`]).
//!
//! The layers: [`process`] runs one child and moves frames (no op knows of
//! it); [`Wire`], one file per op, says how that op's case and outputs lie
//! on the wire (with the case's real memory layout: offset, row stride,
//! poisoned gaps, padding rows); [`ExecSubject`] ties them to the
//! [`Subject`] trait with a pool of children, one per worker thread that
//! needs one, each restarted transparently after it broke.

pub mod config;
pub mod contain;
pub mod moe_combine;
pub mod process;
pub mod router;
pub mod seqwise_loss;
pub mod shared_expert;

use crate::subject::ResolveError;
use crate::subject::{Subject, SubjectError, SubjectKind, SubjectRef};
use oracles::op::{Op, Profile};
use oracles::padding::PaddingRule;
use oracles::vocab::ClampTie;
use process::{Broken, Buffer, Child, Expected, Hello, Refusal, Request, Spawn};
use serde_json::{Map, Value};
use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub use process::kill_all;

/// Poison in the elements of a strided buffer that no valid read touches
/// (the offset, the gaps between rows): the CUDA subject's and the kernel
/// model's NaN, so a subject that reads there gets a NaN that shows.
pub const GAP_POISON: f32 = f32::from_bits(0x7fc0_dead);

/// Which pass a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Fwd,
    Bwd,
}

impl Dir {
    pub fn name(self) -> &'static str {
        match self {
            Dir::Fwd => "fwd",
            Dir::Bwd => "bwd",
        }
    }
}

/// How an op's cases and outputs lie on the wire (`docs/protocol.md`, one
/// section per op; `src/exec/<op>.rs`).
pub trait Wire: Op {
    /// The request's op-specific header fields and input buffers. Invalid
    /// cases are sent as they are (a T of 0, a map of the wrong length, an
    /// offset of 4): refusing them is the subject's job. `Err` only for a
    /// case whose buffers could not be sent at all (more than the storage
    /// bound of a case).
    fn encode(case: &Self::Case, dir: Dir) -> Result<Request, String>;
    /// The outputs a reply to `dir` must hold for this case.
    fn expected(case: &Self::Case, dir: Dir) -> Result<Vec<Expected>, String>;
    /// The forward's outputs from the reply's buffers (as `expected` listed them).
    fn decode_fwd(case: &Self::Case, bufs: Vec<Buffer>) -> Result<Self::Fwd<f32>, String>;
    /// The backward's outputs from the reply's buffers.
    fn decode_bwd(case: &Self::Case, bufs: Vec<Buffer>) -> Result<Self::Bwd<f32>, String>;
}

/// The element count of a T x E matrix placed as `offset`/`row_stride` say
/// (see [`oracles::case::Layout::place`]), computed for any case, valid or
/// not, with `extra` more (or fewer) values than T x E appended or cut, so
/// that a length mismatch stays visible on the wire. At most the storage
/// bound of a case.
pub fn span(t: usize, e: usize, offset: usize, row_stride: usize, values: usize) -> Result<usize, String> {
    let too_big = || {
        format!(
            "{t} x {e} at offset {offset}, row stride {row_stride}: more than {} elements",
            oracles::case::MAX_STORAGE
        )
    };
    let base = if t == 0 {
        0
    } else {
        (t - 1)
            .checked_mul(row_stride)
            .and_then(|n| n.checked_add(offset))
            .and_then(|n| n.checked_add(e))
            .ok_or_else(too_big)?
    };
    let te = t.checked_mul(e).ok_or_else(too_big)?;
    let n = if values >= te {
        base.checked_add(values - te).ok_or_else(too_big)?
    } else {
        base.saturating_sub(te - values)
    };
    if n > oracles::case::MAX_STORAGE {
        return Err(too_big());
    }
    Ok(n)
}

/// `values` (T rows of E, row-major) as they lie in memory: the layout's
/// offset and row stride, [`GAP_POISON`] where no valid read goes; extra
/// values past T x E appended, missing ones cut from the end (an invalid
/// case stays invalid, visibly). Rows that overlap (a row stride below E,
/// invalid) are written in order.
pub fn place(values: &[f32], t: usize, e: usize, offset: usize, row_stride: usize) -> Result<Vec<f32>, String> {
    let n = span(t, e, offset, row_stride, values.len())?;
    let mut buf = vec![GAP_POISON; n];
    let te = t * e;
    // Over the values, not over T x E: an invalid case's T x E may be far
    // more than it holds.
    for (from, &v) in values.iter().enumerate().take(te) {
        let at = offset + (from / e) * row_stride + from % e;
        if let Some(slot) = buf.get_mut(at) {
            *slot = v;
        }
    }
    if values.len() > te {
        let base = n - (values.len() - te);
        buf[base..].copy_from_slice(&values[te..]);
    }
    Ok(buf)
}

/// The expected output `name` of `len` elements, the length checked
/// against the storage bound (an invalid case's product could be absurd).
pub fn expect(name: &'static str, dtype: process::Dtype, len: Option<usize>) -> Result<Expected, String> {
    match len {
        Some(len) if len <= oracles::case::MAX_STORAGE => Ok(Expected { name, dtype, len }),
        _ => Err(format!("output {name} would exceed {} elements", oracles::case::MAX_STORAGE)),
    }
}

/// `name: value` pairs as a JSON header.
pub fn header(fields: Vec<(&str, Value)>) -> Map<String, Value> {
    fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// An external subject: what to run and how long a reply may take.
#[derive(Clone, Debug)]
pub struct ExecSpec {
    /// The name in reports and corpus entries: `exec:<command>` as typed,
    /// or the name in `bitparity.toml`.
    pub name: String,
    pub spawn: Spawn,
    /// The profile `bitparity.toml` says the subject claims (`None`: none);
    /// absent for `exec:` on the command line, where the handshake alone
    /// says.
    pub configured_profile: Option<Option<String>>,
    /// The padding rule `bitparity.toml` says it claims (absent there:
    /// `skip`); `None` for `exec:`, where the handshake alone says.
    pub configured_padding: Option<PaddingRule>,
    /// The clamp tie rule `bitparity.toml` says it implements (absent
    /// there: each case's); `None` for `exec:`, where the handshake alone
    /// says.
    pub configured_clamp_tie: Option<Option<ClampTie>>,
}

/// An external program as a subject of op `O`.
pub struct ExecSubject<O: Op> {
    spec: ExecSpec,
    hello: Hello,
    profile: Option<O::Profile>,
    /// Idle children; a worker takes one (or starts one) per request and
    /// gives it back when it still works.
    pool: Mutex<Vec<Child>>,
    /// Its health: replies that did not come in time, in a row.
    health: Health,
}

/// Whether a subject still answers: after [`crate::knobs::HUNG_AFTER`]
/// timeouts in a row (replies or handshakes, over all its children) it is
/// hung, and every later request is refused at once as unavailable (never a
/// pass), so that a subject that never answers costs a bounded time, not a
/// timeout per request and per shrink step.
struct Health {
    limit: u32,
    in_a_row: std::sync::atomic::AtomicU32,
    hung: std::sync::OnceLock<String>,
}

impl Health {
    fn new(limit: u32) -> Health {
        Health { limit, in_a_row: 0.into(), hung: std::sync::OnceLock::new() }
    }
    fn check(&self) -> Result<(), SubjectError> {
        match self.hung.get() {
            Some(why) => Err(SubjectError::Unavailable(why.clone())),
            None => Ok(()),
        }
    }
    /// A request's outcome: answered (in time), or not.
    fn saw(&self, unresponsive: bool, spec: &ExecSpec) {
        use std::sync::atomic::Ordering;
        if !unresponsive {
            self.in_a_row.store(0, Ordering::Relaxed);
            return;
        }
        let n = self.in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= self.limit {
            let _ = self.hung.set(format!(
                "hung: {n} requests in a row got no reply within {} s ({}={}): its remaining cases are not judged",
                spec.spawn.timeout.as_secs_f64(),
                crate::knobs::HUNG_AFTER,
                self.limit
            ));
        }
    }
}

impl<O: Op + Wire> ExecSubject<O> {
    fn take(&self) -> Result<Child, SubjectError> {
        self.health.check()?;
        if crate::interrupt::hard_stop() {
            return Err(SubjectError::Unavailable("interrupted: no new request after a second interrupt".into()));
        }
        if let Some(c) = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(c);
        }
        // A new child (the first was used by another worker, or the last
        // one broke): it must say what the first said.
        let (child, hello) = Child::start(&self.spec.spawn).map_err(|e| {
            SubjectError::Crashed(match e {
                process::StartError::Spawn(m) => m,
                process::StartError::Handshake(b) => {
                    self.health.saw(b.unresponsive, &self.spec);
                    format!("restarting the child: {}", b.message())
                }
            })
        })?;
        if hello != self.hello {
            return Err(SubjectError::Crashed(format!(
                "a restarted child's handshake ({hello:?}) differs from the first ({:?})",
                self.hello
            )));
        }
        Ok(child)
    }

    fn give(&self, c: Child) {
        self.pool.lock().unwrap_or_else(|e| e.into_inner()).push(c);
    }

    fn call(&self, case: &O::Case, dir: Dir) -> Result<Vec<Buffer>, SubjectError> {
        let cannot = |e: String| SubjectError::Invalid(format!("the case cannot be sent: {e}"));
        let Request { header: mut h, buffers } = O::encode(case, dir).map_err(cannot)?;
        let expected = O::expected(case, dir).map_err(cannot)?;
        h.insert("op".into(), O::NAME.into());
        h.insert("dir".into(), dir.name().into());
        let mut child = self.take()?;
        match child.request(&h, &buffers, &expected) {
            Ok(reply) => {
                self.health.saw(false, &self.spec);
                self.give(child);
                match reply {
                    Ok(bufs) => Ok(bufs),
                    Err(Refusal::Invalid(m)) => Err(SubjectError::Invalid(m)),
                    Err(Refusal::Unavailable(m)) => Err(SubjectError::Unavailable(m)),
                    Err(Refusal::Device(m)) => Err(SubjectError::Device(m)),
                }
            }
            Err(Broken { why, unresponsive }) => {
                self.health.saw(unresponsive, &self.spec);
                Err(SubjectError::Crashed(format!("{} {}: {why}", O::NAME, dir.name())))
            }
        }
    }
}

impl<O: Op + Wire> Subject<O> for ExecSubject<O> {
    fn name(&self) -> String {
        self.spec.name.clone()
    }
    fn profile(&self) -> Option<O::Profile> {
        self.profile.clone()
    }
    /// What its handshake claimed (checked against `bitparity.toml`).
    fn padding(&self) -> PaddingRule {
        self.hello.padding
    }
    /// What its handshake claimed (checked against `bitparity.toml`).
    fn clamp_tie(&self) -> Option<ClampTie> {
        self.hello.clamp_tie
    }
    fn kind(&self) -> SubjectKind {
        SubjectKind::External
    }
    fn lost(&self) -> Option<String> {
        self.health.hung.get().cloned()
    }
    fn forward(&self, case: &O::Case) -> Result<O::Fwd<f32>, SubjectError> {
        let bufs = self.call(case, Dir::Fwd)?;
        O::decode_fwd(case, bufs).map_err(|e| SubjectError::Crashed(format!("{} fwd: a garbled reply: {e}", O::NAME)))
    }
    fn backward(&self, case: &O::Case) -> Result<O::Bwd<f32>, SubjectError> {
        let bufs = self.call(case, Dir::Bwd)?;
        O::decode_bwd(case, bufs).map_err(|e| SubjectError::Crashed(format!("{} bwd: a garbled reply: {e}", O::NAME)))
    }
}

/// The subject's name when `name` names an external subject: `exec:...`, or
/// a subject of the loaded `bitparity.toml`.
pub fn is_exec_name(name: &str) -> bool {
    let name = name.strip_prefix(crate::subject::ANY_ORDER_PREFIX).unwrap_or(name);
    name.starts_with("exec:") || config::get().subject(name).is_some()
}

/// The spec of an external subject named `name`; `None`: not one.
pub fn spec_of(name: &str) -> Option<Result<(ExecSpec, String), String>> {
    if let Some(cmd) = name.strip_prefix("exec:") {
        let argv = match shell_words::split(cmd) {
            Ok(a) if !a.is_empty() => a,
            Ok(_) => return Some(Err(format!("{name:?}: no command after exec:"))),
            Err(e) => return Some(Err(format!("{name:?}: cannot split the command: {e}"))),
        };
        let timeout = match crate::knobs::exec_timeout() {
            Ok(t) => t,
            Err(e) => return Some(Err(e)),
        };
        let spec = ExecSpec {
            name: name.into(),
            spawn: Spawn { argv, env: Vec::new(), timeout },
            configured_profile: None,
            configured_padding: None,
            configured_clamp_tie: None,
        };
        return Some(Ok((spec, String::new())));
    }
    let s = config::get().subject(name)?;
    let spec = ExecSpec {
        name: s.name.clone(),
        spawn: Spawn {
            argv: s.command.clone(),
            env: s.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            timeout: s.timeout,
        },
        configured_profile: Some(s.profile.clone()),
        configured_padding: Some(s.padding),
        configured_clamp_tie: Some(s.clamp_tie),
    };
    Some(Ok((spec, s.op.clone())))
}

/// What a first start of an external subject found, per name: its
/// handshake and the child that gave it (handed to the first op that
/// uses it), or why it cannot be used. Each subject is started once per
/// process however many ops and commands ask for it.
type Started = Result<(Hello, Option<Child>), ResolveError>;
static STARTED: Mutex<Option<HashMap<String, Started>>> = Mutex::new(None);
/// The subjects built, per (op, name): the runner, replay and the usage
/// checks share them (and their children).
type Built = HashMap<(String, String), Arc<dyn Any + Send + Sync>>;
static SUBJECTS: Mutex<Option<Built>> = Mutex::new(None);

fn start(spec: &ExecSpec) -> Started {
    let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
    let map = started.get_or_insert_with(HashMap::new);
    if let Some(r) = map.get_mut(&spec.name) {
        return match r {
            Ok((h, c)) => Ok((h.clone(), c.take())),
            Err(e) => Err(e.clone()),
        };
    }
    let r = match Child::start(&spec.spawn) {
        Ok((c, h)) => Ok((h, Some(c))),
        Err(process::StartError::Spawn(m)) => Err(ResolveError::Unknown(format!("subject {}: {m}", spec.name))),
        Err(process::StartError::Handshake(b)) => {
            Err(ResolveError::Unavailable(format!("subject {}: {}", spec.name, b.message())))
        }
    };
    let out = match &r {
        Ok((h, _)) => Ok((h.clone(), None)),
        Err(e) => Err(e.clone()),
    };
    match r {
        Ok((h, c)) => {
            map.insert(spec.name.clone(), Ok((h.clone(), None)));
            Ok((h, c))
        }
        Err(e) => {
            map.insert(spec.name.clone(), Err(e));
            out
        }
    }
}

/// The external subject `name` for op `O`; `None` when `name` is no
/// external subject's name.
pub fn resolve<O: Op + Wire>(name: &str) -> Option<Result<Vec<SubjectRef<O>>, ResolveError>> {
    let (spec, op) = match spec_of(name)? {
        Ok(x) => x,
        Err(e) => return Some(Err(ResolveError::Unknown(e))),
    };
    if !op.is_empty() && op != O::NAME {
        return Some(Err(ResolveError::Unknown(format!(
            "subject {name} (bitparity.toml) is for op {op}, not {}",
            O::NAME
        ))));
    }
    let key = (O::NAME.to_string(), name.to_string());
    {
        let subjects = SUBJECTS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = subjects.as_ref().and_then(|m| m.get(&key)) {
            if let Ok(s) = s.clone().downcast::<ExecSubject<O>>() {
                return Some(Ok(vec![s as SubjectRef<O>]));
            }
        }
    }
    let (hello, child) = match start(&spec) {
        Ok(x) => x,
        Err(e) => return Some(Err(e)),
    };
    if !hello.ops.iter().any(|o| o == O::NAME) {
        return Some(Err(ResolveError::Unknown(format!(
            "subject {name} serves {}, not {}",
            hello.ops.join(", "),
            O::NAME
        ))));
    }
    if let Some(configured) = &spec.configured_profile {
        if configured != &hello.profile {
            let say = |p: &Option<String>| p.clone().unwrap_or_else(|| "none".into());
            return Some(Err(ResolveError::Unknown(format!(
                "subject {name}: bitparity.toml says it claims profile {}, its handshake claims {}",
                say(configured),
                say(&hello.profile)
            ))));
        }
    }
    if let Some(configured) = spec.configured_padding {
        if configured != hello.padding {
            return Some(Err(ResolveError::Unknown(format!(
                "subject {name}: bitparity.toml says it claims padding {configured}, its handshake claims {}",
                hello.padding
            ))));
        }
    }
    if let Some(configured) = spec.configured_clamp_tie {
        if configured != hello.clamp_tie {
            let say = |t: Option<ClampTie>| t.map_or("none (each case's)", ClampTie::name);
            return Some(Err(ResolveError::Unknown(format!(
                "subject {name}: bitparity.toml says it claims clamp_tie {}, its handshake claims {}",
                say(configured),
                say(hello.clamp_tie)
            ))));
        }
    }
    if let (Some(t), false) = (hello.clamp_tie, O::HAS_CLAMP) {
        return Some(Err(ResolveError::Unknown(format!(
            "subject {name} claims clamp_tie {}, but {} has no clamp (clamp_tie is the loss's: docs/ops/seqwise_loss.md#the-clamp-tie)",
            t.name(),
            O::NAME
        ))));
    }
    if hello.padding == PaddingRule::Mask && !O::HAS_PADDING {
        return Some(Err(ResolveError::Unknown(format!(
            "subject {name} claims padding mask, but {} has no padding rows (docs/padding.md)",
            O::NAME
        ))));
    }
    let profile = match &hello.profile {
        None => None,
        Some(p) => match O::profiles().into_iter().find(|x| x.name() == p) {
            Some(x) => Some(x),
            None => {
                let known: Vec<String> = O::profiles().iter().map(|p| p.name().to_string()).collect();
                return Some(Err(ResolveError::Unknown(format!(
                    "subject {name} claims profile {p:?}, which {} does not have (known: {})",
                    O::NAME,
                    known.join(", ")
                ))));
            }
        },
    };
    let limit = match crate::knobs::hung_after() {
        Ok(n) => n,
        Err(e) => return Some(Err(ResolveError::Unknown(e))),
    };
    let s = Arc::new(ExecSubject::<O> {
        spec,
        hello,
        profile,
        pool: Mutex::new(child.into_iter().collect()),
        health: Health::new(limit),
    });
    SUBJECTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(key, s.clone() as Arc<dyn Any + Send + Sync>);
    Some(Ok(vec![s as SubjectRef<O>]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn place_keeps_layout_and_length_mismatches() {
        let v = [1.0, 2.0, 3.0, 4.0];
        let b = place(&v, 2, 2, 1, 3).unwrap();
        assert_eq!(b.len(), 1 + 3 + 2);
        assert_eq!(&b[1..3], &[1.0, 2.0]);
        assert_eq!(&b[4..6], &[3.0, 4.0]);
        assert!(b[0].is_nan() && b[3].is_nan());
        // One value too many: appended, so the buffer is longer than the
        // layout spans.
        let b = place(&[1.0, 2.0, 3.0, 4.0, 5.0], 2, 2, 1, 3).unwrap();
        assert_eq!(b.len(), 7);
        assert_eq!(b[6], 5.0);
        // One too few: shorter.
        assert_eq!(place(&v[..3], 2, 2, 0, 2).unwrap().len(), 3);
        assert_eq!(place(&[], 0, 5, 3, 5).unwrap().len(), 0);
        assert!(span(3, 1, 0, 1 << 28, 3).is_err());
        assert!(span(usize::MAX, 2, 0, 2, 0).is_err());
    }
}
