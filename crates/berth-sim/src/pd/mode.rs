//! The worker's PD role and a request's bootstrap fields.

use serde_json::Value;

use super::RoomInfo;

/// SGLang's default bootstrap port, used by a decode worker when a request's `bootstrap_port`
/// is null (a prefill server registered with `none`).
pub(crate) const DEFAULT_BOOTSTRAP_PORT: u16 = 8998;

/// Which role of a prefill/decode pair the worker plays (`--mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PdMode {
    /// An ordinary worker: prefill and decode in one place.
    #[default]
    Regular,
    /// Computes the prompt's KV cache, hands it over through its bootstrap listener, answers
    /// with one token.
    Prefill,
    /// Waits for the room's KV cache from the prefill worker, then decodes.
    Decode,
}

impl PdMode {
    /// The `--mode` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Regular => "regular",
            Self::Prefill => "prefill",
            Self::Decode => "decode",
        }
    }
}

impl std::str::FromStr for PdMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "regular" | "null" => Ok(Self::Regular),
            "prefill" => Ok(Self::Prefill),
            "decode" => Ok(Self::Decode),
            other => Err(format!(
                "unknown mode `{other}` (regular, prefill or decode)"
            )),
        }
    }
}

/// A request's bootstrap fields, as a PD-mode worker reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bootstrap {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) room: u64,
}

impl Bootstrap {
    /// The fields of `body`; `Err` names what is missing or malformed. `bootstrap_host` is
    /// needed only by a decode worker, so a prefill worker passes `need_host: false`.
    pub(crate) fn of(body: &Value, need_host: bool) -> Result<Self, String> {
        let room = body
            .get("bootstrap_room")
            .and_then(Value::as_u64)
            .ok_or("bootstrap_room (an integer) is required on a disaggregated worker")?;
        let host = match body.get("bootstrap_host").and_then(Value::as_str) {
            Some(h) => h.to_owned(),
            None if need_host => {
                return Err(
                    "bootstrap_host is required on a disaggregated decode worker".to_owned(),
                );
            }
            None => String::new(),
        };
        let port = match body.get("bootstrap_port") {
            None | Some(Value::Null) => DEFAULT_BOOTSTRAP_PORT,
            Some(v) => v
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .ok_or("bootstrap_port must be a port number or null")?,
        };
        Ok(Self { host, port, room })
    }
}

/// What a generation does for its PD role, decided before the engine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// An ordinary request.
    Regular,
    /// Prefill for this room, then mark it ready.
    Prefill { room: u64 },
    /// The room's KV cache arrived: decode only.
    Decode(RoomInfo),
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bootstrap_fields_are_read_and_missing_ones_named() {
        let b = Bootstrap::of(
            &json!({"bootstrap_host": "10.0.0.1", "bootstrap_port": 9000, "bootstrap_room": 7}),
            true,
        )
        .unwrap();
        assert_eq!((b.host.as_str(), b.port, b.room), ("10.0.0.1", 9000, 7));
        let b = Bootstrap::of(
            &json!({"bootstrap_host": "h", "bootstrap_port": null, "bootstrap_room": 7}),
            true,
        )
        .unwrap();
        assert_eq!(b.port, DEFAULT_BOOTSTRAP_PORT);
        assert!(
            Bootstrap::of(&json!({"bootstrap_host": "h"}), true)
                .unwrap_err()
                .contains("bootstrap_room")
        );
        assert!(
            Bootstrap::of(&json!({"bootstrap_room": 1}), true)
                .unwrap_err()
                .contains("bootstrap_host")
        );
        assert!(Bootstrap::of(&json!({"bootstrap_room": 1}), false).is_ok());
        assert_eq!("prefill".parse(), Ok(PdMode::Prefill));
        assert!("both".parse::<PdMode>().is_err());
    }
}
