//! No import circle between the gateway's top-level modules (docs/architecture.md names the
//! layers). The graph reader is shared with berth-routing's `tests/layers.rs`.

#[path = "../../berth-routing/tests/support/module_graph.rs"]
mod module_graph;

#[test]
fn top_level_modules_import_one_way() {
    module_graph::assert_one_way(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")),
        include_str!("../../../docs/architecture.md"),
        "berth-gateway layers",
    );
}

/// Prints the graph (`cargo test -p berth-gateway --test layers -- --nocapture print`), for
/// docs/architecture.md.
#[test]
fn print_module_graph() {
    let graph = module_graph::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
    println!("{}", module_graph::render(&graph));
}
