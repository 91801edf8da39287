//! The registry of ops: the one list of them, and the one way to reach an op
//! by name. A command's work on an op is written once, as an
//! [`OpCommand`] generic over [`Harness`]; [`with_op`] runs it for the op a
//! name (a `--op`, a corpus entry's `op`, a fuzz target's prefix) names.
//! Adding an op is one name in [`OPS`] and one arm in [`with_op`].

use super::Harness;
use oracles::op::moe_combine::MoeCombine;
use oracles::op::router::Router;
use oracles::op::seqwise_loss::SeqwiseLoss;
use oracles::op::shared_expert::SharedExpert;
use oracles::op::Op;

/// A command's work on one op, for any op.
pub trait OpCommand {
    type Output;
    fn run<O: Harness>(self) -> Self::Output;
}

/// Every op, by name, in the order reports list them.
pub const OPS: [&str; 4] = [SeqwiseLoss::NAME, Router::NAME, SharedExpert::NAME, MoeCombine::NAME];

/// Runs `command` for the op named `name`; `None` when no op has that name.
pub fn with_op<C: OpCommand>(name: &str, command: C) -> Option<C::Output> {
    match name {
        SeqwiseLoss::NAME => Some(command.run::<SeqwiseLoss>()),
        Router::NAME => Some(command.run::<Router>()),
        SharedExpert::NAME => Some(command.run::<SharedExpert>()),
        MoeCombine::NAME => Some(command.run::<MoeCombine>()),
        _ => None,
    }
}

/// The names in `names`, each an op's, each once, in the order given
/// (every op when none is given); an unknown name is an error that lists
/// the ops.
pub fn select(names: &[String]) -> Result<Vec<&'static str>, String> {
    if names.is_empty() {
        return Ok(OPS.to_vec());
    }
    let mut out: Vec<&'static str> = Vec::new();
    for n in names {
        let op = OPS
            .into_iter()
            .find(|o| o == n)
            .ok_or_else(|| format!("unknown op {:?} (known: {})", crate::escape::visible(n), OPS.join(", ")))?;
        if !out.contains(&op) {
            out.push(op);
        }
    }
    Ok(out)
}

/// The names of an op's GPU subjects (`cuda` and its libraries).
struct DeviceNames;

impl OpCommand for DeviceNames {
    type Output = Vec<&'static str>;
    fn run<O: Harness>(self) -> Vec<&'static str> {
        std::iter::once("cuda").chain(O::LIBRARIES.iter().copied()).collect()
    }
}

/// Every op's GPU subject names (`cuda`, `cuda-tc`, `cublas`, ...), once
/// each: built-in names no configured subject may take.
pub fn device_subject_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for n in OPS.into_iter().flat_map(|o| with_op(o, DeviceNames).unwrap_or_default()) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

/// Loads the configuration of external subjects (`--config PATH`, else
/// `./bitparity.toml` when there is one) against the registry's ops and
/// built-in names.
pub fn load_config(path: Option<&std::path::Path>) -> Result<(), String> {
    crate::exec::config::load(path, &OPS, &device_subject_names())
}

/// The classes of an op, in the order its reports list them.
pub struct ClassNames;

impl OpCommand for ClassNames {
    type Output = Vec<String>;
    fn run<O: Harness>(self) -> Vec<String> {
        O::classes().iter().map(|c| c.to_string()).collect()
    }
}
