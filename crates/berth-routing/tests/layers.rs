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
    let doc = include_str!("../../../docs/architecture.md");
    let layers = module_graph::layers(doc, "berth-routing layers");
    let wrong = module_graph::layer_violations(&graph, &layers);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
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

#[test]
fn the_check_sees_an_upward_import() {
    let doc =
        "## t\n| layer | modules |\n|---|---|\n| 0 | `a` |\n| 1 | `b`, `c` |\n## next\n| 0 | `c` |";
    let layers = module_graph::layers(doc, "t");
    assert_eq!(layers.get("c"), Some(&1));
    let mut graph = module_graph::Graph::new();
    graph.entry("b".into()).or_default().insert("a".into());
    graph.entry("c".into()).or_default();
    graph.entry("a".into()).or_default();
    assert!(module_graph::layer_violations(&graph, &layers).is_empty());
    graph.entry("b".into()).or_default().insert("c".into());
    graph.entry("d".into()).or_default();
    assert_eq!(module_graph::layer_violations(&graph, &layers).len(), 2);
}

/// Prints the graph (`cargo test -p berth-routing --test layers -- --nocapture print`), for
/// docs/architecture.md.
#[test]
fn print_module_graph() {
    let graph = module_graph::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
    println!("{}", module_graph::render(&graph));
}
