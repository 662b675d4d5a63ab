//! What-if columns of a replay (`nfsdtop --replay FILE --whatif POLICY`):
//! each entity's predicted share, ratio and wait p99 under one policy,
//! from the agent's what-if report of the whole recording, looked up by
//! name while the replay runs.

use std::collections::HashMap;

use nfsdtop_agent::model::EntityKind;
use nfsdtop_agent::whatif::{Numbers, Report, Row};

#[derive(Clone, Debug, Default)]
pub struct WhatIf {
    /// The predicted policy, e.g. "rr-peer".
    pub policy: String,
    /// The model reproduced the recording under its own policy.
    pub fit_ok: bool,
    peers: HashMap<String, (Numbers, bool)>,
    classes: HashMap<String, (Numbers, bool)>,
}

impl WhatIf {
    /// The columns for `policy` from `r`; `None` if `r` did not predict it.
    pub fn from_report(r: &Report, policy: &str) -> Option<WhatIf> {
        let index = |rows: &[Row]| -> Option<HashMap<String, (Numbers, bool)>> {
            rows.iter()
                .map(|row| {
                    let p = row.predicted.iter().find(|p| p.policy == policy)?;
                    Some((row.name.clone(), (p.numbers, row.fit_ok)))
                })
                .collect()
        };
        Some(WhatIf {
            policy: policy.to_string(),
            fit_ok: r.fit.ok,
            peers: index(&r.peers)?,
            classes: index(&r.classes)?,
        })
    }

    /// The prediction for an entity, and whether its fit is trusted.
    pub fn get(&self, kind: EntityKind, name: &str) -> Option<&(Numbers, bool)> {
        match kind {
            EntityKind::Peer => self.peers.get(name),
            EntityKind::Class => self.classes.get(name),
        }
    }
}
