//! [`Lib`]: the library instance (`ucc_init`): configuration and components.

use std::sync::Arc;

use crate::backend::{Mc, McSet, TlComponent};
use crate::config::Config;
use crate::error::{Error, Result};

/// UCC's thread modes. ferrocoll's objects are always safe to share between
/// threads; the mode is recorded and reported, as UCC's attribute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ThreadMode {
    /// One thread (UCC's default).
    #[default]
    Single,
    /// Many threads, but only one calls ferrocoll.
    Funneled,
    /// Any thread may call ferrocoll at any time.
    Multiple,
}

/// Parameters of [`Lib`] creation.
#[derive(Clone, Debug, Default)]
pub struct LibParams {
    /// Thread mode.
    pub thread_mode: ThreadMode,
    /// Overrides laid over the `UCC_*` environment (UCC's `ucc_lib_config_modify`).
    pub config: Config,
}

/// The components a library is built from (the facade supplies all of them).
#[derive(Clone, Default)]
pub struct Components {
    /// Memory components.
    pub mcs: Vec<Arc<dyn Mc>>,
    /// Transport layers, in priority order for equal scores.
    pub tls: Vec<Arc<dyn TlComponent>>,
}

pub(crate) struct LibInner {
    pub(crate) thread_mode: ThreadMode,
    pub(crate) config: Config,
    pub(crate) mcs: McSet,
    pub(crate) tls: Vec<Arc<dyn TlComponent>>,
}

/// A library instance. Create one per process (or per independent user).
///
/// The facade crate `ferrocoll` offers `Lib::new()` with every component;
/// this constructor takes the components explicitly.
#[derive(Clone)]
pub struct Lib {
    pub(crate) inner: Arc<LibInner>,
}

impl Lib {
    /// A library over `components`, configured from the configuration file
    /// (`UCC_CONFIG_FILE`), the environment and `params.config`, later ones winning.
    ///
    /// `UCC_TLS` selects transport layers: a comma-separated list (`p2p,self`),
    /// `^list` to exclude, or `all`. UCC's name `ucp` means ferrocoll's `p2p`.
    pub fn with_components(params: LibParams, components: Components) -> Result<Lib> {
        let config = Config::from_file_and_env()?.merged(&params.config);
        if let Some(v) = config.get("LOG_LEVEL") {
            let Some(level) = crate::log::Level::parse(v) else {
                return Err(Error::invalid_param(format!(
                    "UCC_LOG_LEVEL={v:?} is not a level (fatal, error, warn, diag, info, debug, trace, or n for none)"
                )));
            };
            // The file's or the parameters' level too, not only the environment's.
            crate::log::set_max_level(level);
        }
        let tls = select_tls(&components.tls, config.get("TLS"))?;
        Ok(Lib {
            inner: Arc::new(LibInner { thread_mode: params.thread_mode, config, mcs: McSet::new(components.mcs), tls }),
        })
    }

    /// The configuration in effect.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The thread mode.
    pub fn thread_mode(&self) -> ThreadMode {
        self.inner.thread_mode
    }

    /// The transport layers in use.
    pub fn tls(&self) -> &[Arc<dyn TlComponent>] {
        &self.inner.tls
    }

    /// The memory components.
    pub fn mcs(&self) -> &McSet {
        &self.inner.mcs
    }
}

fn canonical_tl_name(name: &str) -> String {
    let n = name.trim().to_ascii_lowercase();
    if n == "ucp" { "p2p".to_string() } else { n }
}

fn select_tls(all: &[Arc<dyn TlComponent>], spec: Option<&str>) -> Result<Vec<Arc<dyn TlComponent>>> {
    let spec = spec.unwrap_or("all").trim();
    if spec.eq_ignore_ascii_case("all") {
        return Ok(all.to_vec());
    }
    let (exclude, list) = match spec.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, spec),
    };
    let names: Vec<String> = list.split(',').filter(|s| !s.trim().is_empty()).map(canonical_tl_name).collect();
    for n in &names {
        if !all.iter().any(|t| t.name() == n) {
            crate::log_warn!("UCC_TLS names unknown TL {n:?}; known: {}", tl_names(all));
        }
    }
    let chosen: Vec<_> = all.iter().filter(|t| names.iter().any(|n| n == t.name()) != exclude).cloned().collect();
    if chosen.is_empty() {
        return Err(Error::invalid_param(format!(
            "UCC_TLS={spec:?} leaves no transport layer (known: {})",
            tl_names(all)
        )));
    }
    Ok(chosen)
}

fn tl_names(all: &[Arc<dyn TlComponent>]) -> String {
    all.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
}
