//! The route table of docs/gateway.md, parsed: shared by the admin router's unit test
//! (`src/admin/routes.rs`) and `tests/ops_routes.rs` through `#[path]`, so it is not part of
//! the library.

/// `(method, path)` of every route in the Routes table of a gateway.md (the docs are checked
/// against the router with it, here and by the integration tests); the query is left out.
pub(crate) fn docs_route_table(doc: &str) -> Vec<(String, String)> {
    let section = doc
        .split("\n## Routes\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or_default();
    let mut out = Vec::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let first = row.split('|').nth(1).unwrap_or_default();
        let mut method = "";
        for item in first.split('`').skip(1).step_by(2) {
            let path = match item.split_once(' ') {
                Some((m, p)) => {
                    method = m;
                    p
                }
                None => item,
            };
            let path = path.split('?').next().unwrap_or_default();
            out.push((method.to_owned(), path.to_owned()));
        }
    }
    out
}
