//! The triage of surviving mutants, `kernels/mutants.toml` (embedded in the
//! binary, as the kernels are): `[[equivalent]]` entries are mutants shown
//! to compute what the original computes, each with its reason, and only
//! they leave the score; `[[unkillable]]` entries are survivors that are not
//! equivalent but that no test can kill, each with why: they stay in the
//! score as survivors, explained.

use serde::Deserialize;
use std::collections::BTreeMap;

/// The committed triage.
pub const EMBEDDED: &str = include_str!("../../kernels/mutants.toml");

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    equivalent: Vec<Entry>,
    #[serde(default)]
    unkillable: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    id: String,
    reason: String,
}

/// What the triage says of a mutant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Equivalent(String),
    Unkillable(String),
}

/// The triage, by mutant id.
#[derive(Debug, Default)]
pub struct Triage(pub BTreeMap<String, Verdict>);

impl Triage {
    /// Parses a triage file; `what` names it in errors. An id listed twice,
    /// an empty reason or an unknown key is an error.
    pub fn parse(text: &str, what: &str) -> Result<Triage, String> {
        let f: File = toml::from_str(text).map_err(|e| format!("{what}: {e}"))?;
        let mut out = BTreeMap::new();
        let tagged = f.equivalent.into_iter().map(|e| (e, true)).chain(f.unkillable.into_iter().map(|e| (e, false)));
        for (e, equivalent) in tagged {
            if e.reason.trim().is_empty() {
                return Err(format!("{what}: {} has no reason", e.id));
            }
            let v = if equivalent { Verdict::Equivalent(e.reason) } else { Verdict::Unkillable(e.reason) };
            if out.insert(e.id.clone(), v).is_some() {
                return Err(format!("{what}: {} is listed twice", e.id));
            }
        }
        Ok(Triage(out))
    }

    pub fn get(&self, id: &str) -> Option<&Verdict> {
        self.0.get(id)
    }

    /// Ids listed that name no mutant of these sources (a stale entry: the
    /// line changed, and the mutant must be triaged again).
    pub fn stale<'a>(&'a self, ids: &std::collections::HashSet<&str>) -> Vec<&'a str> {
        self.0.keys().map(String::as_str).filter(|k| !ids.contains(k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_triage_parses_and_names_only_existing_mutants() {
        let t = Triage::parse(EMBEDDED, "kernels/mutants.toml").unwrap();
        let all = super::super::all();
        let ids = all.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(t.stale(&ids), Vec::<&str>::new());
    }

    #[test]
    fn bad_triage_files_are_refused() {
        let twice = "[[equivalent]]\nid='a'\nreason='r'\n[[unkillable]]\nid='a'\nreason='s'\n";
        assert!(Triage::parse(twice, "t").unwrap_err().contains("twice"));
        assert!(Triage::parse("[[equivalent]]\nid='a'\nreason=' '\n", "t").unwrap_err().contains("no reason"));
        assert!(Triage::parse("[[equivalent]]\nid='a'\n", "t").is_err());
        assert!(Triage::parse("[[other]]\nid='a'\nreason='r'\n", "t").is_err());
        let t = Triage::parse("[[unkillable]]\nid='a'\nreason='r'\n", "t").unwrap();
        assert_eq!(t.get("a"), Some(&Verdict::Unkillable("r".into())));
    }
}
