//! No import circle between the routing core's top-level modules (docs/architecture.md).

#[path = "support/module_graph.rs"]
mod module_graph;

/// Edges known to close a circle, each with the change that removes it. An entry whose edge is
/// gone fails the test too, so the list only shrinks.
const PENDING: &[(&str, &str, &str)] = &[(
    "worker",
    "policy",
    "issue #18 moves ttft_aware's TtftStats out of WorkerStats into the policy",
)];

#[test]
fn top_level_modules_import_one_way() {
    let mut graph = module_graph::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
    for (from, to, why) in PENDING {
        let present = graph.get_mut(*from).is_some_and(|e| e.remove(*to));
        assert!(
            present,
            "{from} -> {to} no longer exists ({why}): remove it from PENDING"
        );
    }
    let cycles = module_graph::cycles(&graph);
    assert!(
        cycles.is_empty(),
        "import circles between top-level modules: {cycles:?}\n{}",
        module_graph::render(&graph)
    );
}

#[test]
fn the_check_sees_a_circle() {
    let mut graph = module_graph::Graph::new();
    graph.entry("a".into()).or_default().insert("b".into());
    graph.entry("b".into()).or_default().insert("c".into());
    assert!(module_graph::cycles(&graph).is_empty());
    graph.entry("c".into()).or_default().insert("a".into());
    assert_eq!(module_graph::cycles(&graph), vec![vec!["a", "b", "c"]]);
}
