//! Responses chain entries in the store: `<prefix>:chain:<response id>` holds the session key
//! the response belongs to, with the pin TTL (the idle period), so a replica that never saw
//! the response can key a `previous_response_id` turn.

use super::metrics::op;
use super::sync::{PinHost, Store};

impl Store {
    /// Writes `id -> key`; when the response was keyless (its id became its key), also
    /// places the local pin `pin` (the id's pin hash) unless one is stored already, so every
    /// replica sends the chain to that worker. `false` when the store did not answer.
    pub(crate) async fn write_chain<S: PinHost>(
        &self,
        state: &S,
        id: &str,
        key: &str,
        pin: Option<u128>,
    ) -> bool {
        let chain = self.names.chain(id);
        let pin = pin.and_then(|h| {
            let view = state.view();
            Some((self.names.key(h), Store::local_value(state, &view, h)?))
        });
        let key = key.to_owned();
        let ttl = self.ttl_ms;
        self.link
            .call(op::CHAIN, |mut c| async move {
                let mut p = redis::pipe();
                match ttl {
                    0 => p.set(&chain, &key).ignore(),
                    ms => p
                        .cmd("SET")
                        .arg(&chain)
                        .arg(&key)
                        .arg("PX")
                        .arg(ms)
                        .ignore(),
                };
                if let Some((pin_key, value)) = &pin {
                    let cmd = p.cmd("SET").arg(pin_key).arg(value).arg("NX");
                    if ttl > 0 {
                        cmd.arg("PX").arg(ttl);
                    }
                    cmd.ignore();
                }
                p.query_async::<()>(&mut c).await
            })
            .await
            .is_some()
    }

    /// The session key stored for response `id`: `Some(None)` when none is stored, `None` when
    /// the store did not answer.
    pub(crate) async fn read_chain(&self, id: &str) -> Option<Option<String>> {
        let chain = self.names.chain(id);
        self.link
            .call(op::CHAIN, |mut c| async move {
                redis::cmd("GET")
                    .arg(&chain)
                    .query_async::<Option<String>>(&mut c)
                    .await
            })
            .await
    }
}
