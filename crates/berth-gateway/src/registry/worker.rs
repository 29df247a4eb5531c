//! One registered worker.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Uri};

use crate::routing::{Breaker, HealthTracker, WorkerId, WorkerStats};

/// A worker's parsed URL: the base URL (`http[s]://host:port[/prefix]`) connections, probes and
/// model discovery go to, and the data-parallel rank of a worker registered as `<url>@<rank>`.
#[derive(Clone, Debug)]
pub struct WorkerAddr {
    /// `https://`: connections are TLS.
    tls: bool,
    authority: Authority,
    prefix: String,
    rank: Option<u32>,
}

/// Splits a `<url>@<rank>` suffix off (rank: a decimal u32). A URL without `@` has no rank.
fn split_rank(url: &str) -> Result<(&str, Option<u32>), String> {
    let Some((base, rank)) = url.rsplit_once('@') else {
        return Ok((url, None));
    };
    let bad = || {
        format!(
            "`{url}`: `@{rank}` is not a data-parallel rank (expected `<url>@<rank>`, rank a decimal u32)"
        )
    };
    if rank.is_empty() || !rank.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let rank = rank.parse::<u32>().map_err(|_| bad())?;
    if base.contains('@') {
        return Err(format!(
            "`{url}`: a worker URL has at most one `@<rank>` suffix"
        ));
    }
    Ok((base, Some(rank)))
}

impl WorkerAddr {
    /// Parses a worker URL, `http://host:port[/prefix]` or `https://...`, optionally followed
    /// by `@<rank>` (a data-parallel rank of that worker).
    pub fn parse(url: &str) -> Result<Self, String> {
        let (base, rank) = split_rank(url)?;
        let uri: Uri = base
            .parse()
            .map_err(|e| format!("`{url}` is not a URL: {e}"))?;
        let tls = match uri.scheme() {
            Some(s) if *s == Scheme::HTTP => false,
            Some(s) if *s == Scheme::HTTPS => true,
            _ => {
                return Err(format!(
                    "`{url}`: only http:// and https:// worker URLs are supported"
                ));
            }
        };
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| format!("`{url}` has no host"))?;
        if uri.query().is_some() {
            return Err(format!("`{url}` must not have a query"));
        }
        let prefix = uri.path().trim_end_matches('/').to_owned();
        let addr = Self {
            tls,
            authority,
            prefix,
            rank,
        };
        addr.tls_server_name()
            .map_err(|e| format!("`{url}`: {e}"))?;
        Ok(addr)
    }

    /// The data-parallel rank (`<url>@<rank>`), if the worker was registered with one.
    pub fn rank(&self) -> Option<u32> {
        self.rank
    }

    /// `host:port` to connect to (port 80, or 443 for `https://`, when the URL has none).
    pub(crate) fn socket_target(&self) -> String {
        match self.authority.port_u16() {
            Some(_) => self.authority.as_str().to_owned(),
            None => format!(
                "{}:{}",
                self.authority.host(),
                if self.tls { 443 } else { 80 }
            ),
        }
    }

    /// For an `https://` worker, the name its certificate must carry (its host: a DNS name or
    /// an IP address); `Ok(None)` for `http://`.
    pub(crate) fn tls_server_name(
        &self,
    ) -> Result<Option<rustls::pki_types::ServerName<'static>>, String> {
        if !self.tls {
            return Ok(None);
        }
        let host = self.authority.host();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        rustls::pki_types::ServerName::try_from(host.to_owned())
            .map(Some)
            .map_err(|e| format!("`{host}` is not a TLS server name: {e}"))
    }

    /// The `Host` header value for requests to this worker.
    pub(crate) fn host_header(&self) -> Option<HeaderValue> {
        HeaderValue::from_str(self.authority.as_str()).ok()
    }

    /// The origin-form URI (path and query) of `path_and_query` on this worker.
    pub(crate) fn origin_uri(&self, path_and_query: &str) -> Result<Uri, http::Error> {
        if self.prefix.is_empty() {
            return Ok(Uri::from(PathAndQuery::try_from(path_and_query)?));
        }
        Ok(Uri::from(PathAndQuery::try_from(format!(
            "{}{path_and_query}",
            self.prefix
        ))?))
    }

    /// The URI of `path_and_query` on this worker.
    pub(crate) fn uri(&self, path_and_query: &str) -> Result<Uri, http::Error> {
        let pq: PathAndQuery = if self.prefix.is_empty() {
            PathAndQuery::try_from(path_and_query)?
        } else {
            PathAndQuery::try_from(format!("{}{path_and_query}", self.prefix))?
        };
        Uri::builder()
            .scheme(if self.tls {
                Scheme::HTTPS
            } else {
                Scheme::HTTP
            })
            .authority(self.authority.clone())
            .path_and_query(pq)
            .build()
    }
}

/// What a worker's `GET /v1/models` says about one model besides its id (`created`,
/// `owned_by`): the gateway's own `/v1/models` and `/workers` show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ModelCard {
    pub(crate) id: Arc<str>,
    /// Unix seconds, 0 when the worker did not say.
    pub(crate) created: u64,
    /// The serving runtime as the worker names itself (`sglang`, `vllm`, ...).
    pub(crate) owned_by: Option<Arc<str>>,
}

/// Health and breaker state; changed by probes and request outcomes.
#[derive(Debug)]
pub(crate) struct WorkerState {
    pub(crate) health: HealthTracker,
    pub(crate) breaker: Breaker,
    pub(crate) models: Vec<Arc<str>>,
}

/// A registered worker. Shared by the request path through the [`super::View`].
#[derive(Debug)]
pub(crate) struct Worker {
    pub(crate) id: WorkerId,
    /// The URL exactly as registered: the `x-smg-routed-worker-id` value and the metric label.
    pub(crate) url: Arc<str>,
    pub(crate) url_header: HeaderValue,
    /// `Host` for proxied requests.
    pub(crate) host_header: HeaderValue,
    pub(crate) addr: WorkerAddr,
    pub(crate) stats: Arc<WorkerStats>,
    /// The breaker is closed with no failure counted (a success needs no update).
    pub(crate) breaker_clean: AtomicBool,
    /// A start-up worker that has not answered yet: its first good probe brings it in.
    awaited: AtomicBool,
    state: Mutex<WorkerState>,
    /// The model cards from the worker's last `GET /v1/models` that listed any.
    cards: Mutex<Vec<ModelCard>>,
}

impl Worker {
    pub(crate) fn new(id: WorkerId, url: &str, state: WorkerState) -> Result<Self, String> {
        let addr = WorkerAddr::parse(url)?;
        let url_header = HeaderValue::from_str(url)
            .map_err(|_| format!("`{url}` is not a valid header value"))?;
        let host_header = addr
            .host_header()
            .ok_or_else(|| format!("`{url}` has an invalid host"))?;
        Ok(Self {
            id,
            url: Arc::from(url),
            url_header,
            host_header,
            addr,
            stats: Arc::default(),
            breaker_clean: AtomicBool::new(true),
            awaited: AtomicBool::new(false),
            state: Mutex::new(state),
            cards: Mutex::default(),
        })
    }

    /// Whether this start-up worker has not answered yet.
    pub(crate) fn awaited(&self) -> bool {
        self.awaited.load(Ordering::Relaxed)
    }

    /// Marks a start-up worker as awaited (registered before its first probe).
    pub(crate) fn await_startup(&self) {
        self.awaited.store(true, Ordering::Relaxed);
    }

    /// No longer awaited (it came up, or start-up waiting is over).
    pub(crate) fn stop_awaiting(&self) {
        self.awaited.store(false, Ordering::Relaxed);
    }

    /// The model cards the worker listed (empty until it answered `GET /v1/models`).
    pub(crate) fn cards(&self) -> Vec<ModelCard> {
        self.cards.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records the cards of a `GET /v1/models` answer (an empty answer keeps the old ones).
    pub(crate) fn set_cards(&self, cards: Vec<ModelCard>) {
        if !cards.is_empty() {
            *self.cards.lock().unwrap_or_else(|p| p.into_inner()) = cards;
        }
    }

    /// Locks the health/breaker state (never held across an await).
    pub(crate) fn state(&self) -> MutexGuard<'_, WorkerState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::WorkerAddr;

    #[test]
    fn rank_suffixes() {
        let plain = WorkerAddr::parse("http://127.0.0.1:30001").unwrap();
        assert_eq!(plain.rank(), None);
        let r1 = WorkerAddr::parse("http://127.0.0.1:30001@1").unwrap();
        assert_eq!(r1.rank(), Some(1));
        assert_eq!(r1.socket_target(), "127.0.0.1:30001");
        assert_eq!(r1.uri("/health").unwrap(), "http://127.0.0.1:30001/health");
        let prefixed = WorkerAddr::parse("http://h:1/v1/@7").unwrap();
        assert_eq!(prefixed.rank(), Some(7));
        assert_eq!(prefixed.uri("/health").unwrap(), "http://h:1/v1/health");
        for bad in [
            "http://h:1@",
            "http://h:1@x",
            "http://h:1@-1",
            "http://h:1@+1",
            "http://h:1@4294967296",
            "http://u@h:1",
            "http://u@h:1@0",
        ] {
            let err = WorkerAddr::parse(bad).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }
}
