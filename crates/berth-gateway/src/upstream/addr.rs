//! A worker's address: where connections, probes and model discovery go.

use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Uri};

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

    /// The path of the worker's URL (without a trailing `/`; empty for none): requests go
    /// below it.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
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
