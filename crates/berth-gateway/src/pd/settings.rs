//! The PD configuration: the prefill workers with their bootstrap ports, and the prefill policy.

use crate::routing::{PolicyKind, RouterOptions};

/// One `--prefill URL [BOOTSTRAP_PORT|none]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefillUrl {
    /// The prefill worker's base URL.
    pub url: String,
    /// Its bootstrap server's port, sent as `bootstrap_port`; `None` (`none`, or not given)
    /// sends `null`, leaving the decode worker to its default.
    pub bootstrap_port: Option<u16>,
}

impl PrefillUrl {
    /// Parses the values of every `--prefill` in order: each URL (it has `://`) may be followed
    /// by its bootstrap port or `none`. A value may also hold both, space-separated (the TOML
    /// form `prefill = ["http://p1:8000 9000", "http://p2:8000 none"]`).
    pub fn parse_all(values: &[String]) -> Result<Vec<Self>, String> {
        let mut out: Vec<Self> = Vec::new();
        let mut port_allowed = false;
        for token in values.iter().flat_map(|v| v.split_whitespace()) {
            if token.contains("://") {
                out.push(Self {
                    url: token.to_owned(),
                    bootstrap_port: None,
                });
                port_allowed = true;
                continue;
            }
            let Some(last) = out.last_mut().filter(|_| port_allowed) else {
                return Err(format!(
                    "`{token}`: expected a worker URL (URL [BOOTSTRAP_PORT|none])"
                ));
            };
            port_allowed = false;
            if !token.eq_ignore_ascii_case("none") {
                last.bootstrap_port = Some(token.parse::<u16>().map_err(|_| {
                    format!("`{token}` is not a bootstrap port (a number, or `none`)")
                })?);
            }
        }
        Ok(out)
    }
}

/// What `--pd-disaggregation` adds to the configuration. The decode workers are the regular
/// `worker_urls` and the decode policy is the regular `router.policy`.
#[derive(Clone, Debug, PartialEq)]
pub struct PdSettings {
    /// The prefill workers (`--prefill`).
    pub prefill: Vec<PrefillUrl>,
    /// `--prefill-policy` (default: `--policy`).
    pub prefill_policy: PolicyKind,
}

impl PdSettings {
    /// The prefill router's options: the regular ones with the prefill policy.
    pub(crate) fn router_options(&self, base: &RouterOptions) -> RouterOptions {
        RouterOptions {
            policy: self.prefill_policy,
            ..base.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn prefill_values_take_an_optional_port_or_none() {
        let p = PrefillUrl::parse_all(&v(&[
            "http://a:1",
            "9000",
            "http://b:2",
            "none",
            "http://c:3",
        ]))
        .unwrap();
        let ports: Vec<_> = p.iter().map(|p| p.bootstrap_port).collect();
        assert_eq!(ports, [Some(9000), None, None]);
        assert_eq!(p[2].url, "http://c:3");
        let p = PrefillUrl::parse_all(&v(&["http://a:1 8998", "http://b:2"])).unwrap();
        assert_eq!(p[0].bootstrap_port, Some(8998));
        assert!(PrefillUrl::parse_all(&v(&["http://a:1", "port"])).is_err());
        assert!(PrefillUrl::parse_all(&v(&["http://a:1", "1", "2"])).is_err());
        assert!(PrefillUrl::parse_all(&v(&["9000"])).is_err());
    }
}
