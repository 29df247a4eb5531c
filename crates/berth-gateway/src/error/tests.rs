use super::*;

#[test]
fn every_error_has_the_one_shape() {
    let errs = [
        GatewayError::JsonParse("x".into()),
        GatewayError::MissingRoutingKey { policy: "manual" },
        GatewayError::Unauthorized,
        GatewayError::ModelNotFound("m".into()),
        GatewayError::PayloadTooLarge(1),
        GatewayError::RequestBodyTimeout("stalled".into()),
        GatewayError::UpstreamConnection {
            worker: "w".into(),
            reason: "r".into(),
        },
        GatewayError::NoAvailableWorkers,
        GatewayError::UpstreamTimeout("w".into()),
        GatewayError::BodyBudgetExhausted,
        GatewayError::BodyOverBudget(1),
        GatewayError::Overloaded(crate::admission::Rejection {
            kind: RejectionKind::QueueTimeout,
            retry_after_secs: 3,
            max_concurrent: Some(1),
            queue_size: 1,
            queue_timeout: std::time::Duration::from_secs(1),
            rate: None,
        }),
    ];
    let expected = [400, 400, 401, 404, 413, 408, 502, 503, 504, 503, 413, 429];
    for (e, status) in errs.iter().zip(expected) {
        let r = e.to_response::<crate::proxy::RequestGuard, crate::upstream::UpResponse>();
        assert_eq!(r.status().as_u16(), status);
        let code = r
            .headers()
            .get(ERROR_CODE_HEADER)
            .unwrap()
            .to_str()
            .unwrap();
        assert_eq!(code, e.code().as_str());
        if status == 503 {
            assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        }
        if status == 429 {
            assert_eq!(r.headers()[header::RETRY_AFTER], "3");
            assert_eq!(code, "queue_timeout");
        }
    }
}

#[test]
fn all_lists_every_code_in_order_and_wire_names_round_trip() {
    assert_eq!(ErrorCode::ALL.len(), ErrorCode::Internal as usize + 1);
    for (i, c) in ErrorCode::ALL.into_iter().enumerate() {
        assert_eq!(c as usize, i);
        assert_eq!(ErrorCode::from_wire(c.as_str().as_bytes()), Some(c));
    }
    assert_eq!(ErrorCode::from_wire(b"nope"), None);
}

#[test]
fn a_stream_error_is_one_event_in_the_same_shape() {
    let e = GatewayError::UpstreamStream {
        worker: "http://w".into(),
        reason: "connection closed".into(),
    };
    let ev = e.to_sse_event(false, SseStyle::OpenAi);
    let text = std::str::from_utf8(&ev).unwrap();
    let json = text
        .strip_prefix("data: ")
        .and_then(|t| t.strip_suffix("\n\n"))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["error"]["code"], "upstream_stream_error");
    assert_eq!(v["error"]["type"], "server_error");
    assert!(
        e.to_sse_event(true, SseStyle::OpenAi)
            .starts_with(b"\n\ndata: ")
    );
    let ev = e.to_sse_event(false, SseStyle::Anthropic);
    let text = std::str::from_utf8(&ev).unwrap();
    let json = text
        .strip_prefix("event: error\ndata: ")
        .and_then(|t| t.strip_suffix("\n\n"))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "api_error");
    assert_eq!(v["error"]["code"], "upstream_stream_error");
}

#[test]
fn missing_key_message_says_how_to_fix() {
    let msg = GatewayError::MissingRoutingKey { policy: "manual" }.to_string();
    assert!(msg.contains("X-SMG-Routing-Key"));
    assert!(msg.contains("--allow-requests-without-routing-key"));
}
