//! What the members of a team must agree on before it serves collectives,
//! decided from what every endpoint said of itself at context creation
//! (`endpoint.rs`), so every member decides alike without a message:
//!
//! - **the TLs**: a TL serves the team only if every member has it (a rank
//!   with `UCC_TLS=shm,self` and one with `UCC_TLS=p2p,self` could otherwise
//!   each wait in a TL the other never opens);
//! - **their settings**: each TL's agreed variables (tune strings, algorithm
//!   knobs) must be equal on every member, or ranks would choose different
//!   algorithms — or run one with different radixes — for one collective.
//!
//! Per-team overrides (`TeamParams::config`) are each rank's own, unknown
//! to the others at context creation: [`team_settings`] hands the team's
//! agreed variables with this member's values to the TLs, and a TL that
//! meets the other members while it creates its team compares them (the
//! p2p TL, in its creation handshake), refusing the team on every member,
//! naming the variable, if they differ.

use std::sync::Arc;

use super::context::ContextInner;
use crate::config::Config;
use crate::error::{Error, Result};

/// The agreed variables of the TLs `tls` (indices into the context's) with
/// their values in `config` (the context's merged with the team's
/// overrides; unset is empty), in the TLs' order: alike on every member
/// that agrees.
pub(crate) fn team_settings(ctx: &ContextInner, tls: &[usize], config: &Config) -> Arc<[(String, String)]> {
    tls.iter()
        .filter_map(|&i| ctx.tls.get(i))
        .flat_map(|tl| tl.component.agreed_fields())
        .map(|var| (var.to_string(), config.get(var).unwrap_or_default().to_string()))
        .collect()
}

/// Indices (into the context's TLs) of the TLs every member in `eps` has;
/// each one left out is logged at debug level, with the member that lacks it.
pub(crate) fn common_tls(ctx: &ContextInner, eps: &[usize]) -> Vec<usize> {
    (0..ctx.tls.len())
        .filter(|&i| {
            let name = ctx.tls[i].component.name();
            match eps.iter().find(|&&ep| ctx.endpoints.get(ep).is_none_or(|e| !e.has_tl(name))) {
                None => true,
                Some(ep) => {
                    crate::log_debug!("TL {name} is off for a team over {eps:?}: endpoint {ep} does not have it");
                    false
                }
            }
        })
        .collect()
}

/// A sentence on the TLs the members have, for the error when none is common.
pub(crate) fn describe_tls(ctx: &ContextInner, eps: &[usize]) -> String {
    eps.iter()
        .filter_map(|&ep| {
            let e = ctx.endpoints.get(ep)?;
            let names: Vec<&str> = e.tls.iter().map(|(n, _)| n.as_str()).collect();
            Some(format!("endpoint {ep} has {}", if names.is_empty() { "none".into() } else { names.join(", ") }))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// An error naming the first variable of a TL in `tls` that some member in
/// `eps` set differently from this endpoint.
pub(crate) fn check_settings(ctx: &ContextInner, eps: &[usize], tls: &[usize]) -> Result<()> {
    let Some(me) = ctx.endpoints.get(ctx.ep) else { return Ok(()) };
    for &i in tls {
        let name = ctx.tls[i].component.name();
        for (var, mine) in me.agreed_of(name) {
            for &ep in eps.iter().filter(|&&ep| ep != ctx.ep) {
                let theirs = ctx.endpoints.get(ep).and_then(|e| e.agreed_of(name).find(|(v, _)| *v == var));
                let theirs = theirs.map_or("", |(_, value)| value);
                if theirs != mine {
                    let show = |v: &str| if v.is_empty() { "unset".to_string() } else { format!("{v:?}") };
                    return Err(Error::invalid_param(format!(
                        "{var} differs between the team's members: {} on endpoint {} (this one), {} on \
                         endpoint {ep}; every member must set TL {name}'s tuning alike, or they would run \
                         different algorithms for one collective",
                        show(mine),
                        ctx.ep,
                        show(theirs)
                    )));
                }
            }
        }
    }
    Ok(())
}
