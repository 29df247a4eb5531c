//! No import circle between the routing core's top-level modules (docs/architecture.md).

#[path = "support/module_graph.rs"]
mod module_graph;

#[test]
fn top_level_modules_import_one_way() {
    module_graph::assert_one_way(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")),
        include_str!("../../../docs/architecture.md"),
        "berth-routing layers",
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
