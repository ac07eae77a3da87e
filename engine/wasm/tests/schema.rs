//! `sdk/schema/*.json` are generated from the `flotilla-abi` types; this test fails when they are
//! stale. `FLOTILLA_BLESS=1` rewrites them.

use std::path::Path;

use flotilla_abi::{
    AssignReply, BindingRequest, ClustersRequest, FilterReply, InitRequest, InterpretReply,
    InterpretRequest, Metadata, OverrideReply, OverrideRequest, SelectReply, VictimsReply,
    VictimsRequest,
};

#[test]
fn sdk_schemas_are_generated_from_the_abi_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/schema");
    let schemas = [
        ("Metadata", schemars::schema_for!(Metadata)),
        ("InitRequest", schemars::schema_for!(InitRequest)),
        ("ClustersRequest", schemars::schema_for!(ClustersRequest)),
        ("BindingRequest", schemars::schema_for!(BindingRequest)),
        ("FilterReply", schemars::schema_for!(FilterReply)),
        ("SelectReply", schemars::schema_for!(SelectReply)),
        ("AssignReply", schemars::schema_for!(AssignReply)),
        ("OverrideRequest", schemars::schema_for!(OverrideRequest)),
        ("OverrideReply", schemars::schema_for!(OverrideReply)),
        ("InterpretRequest", schemars::schema_for!(InterpretRequest)),
        ("InterpretReply", schemars::schema_for!(InterpretReply)),
        ("VictimsRequest", schemars::schema_for!(VictimsRequest)),
        ("VictimsReply", schemars::schema_for!(VictimsReply)),
    ];
    let bless = std::env::var_os("FLOTILLA_BLESS").is_some();
    let mut stale = Vec::new();
    for (name, schema) in schemas {
        let path = dir.join(format!("{name}.json"));
        let text = serde_json::to_string_pretty(&schema).expect("schema serializes") + "\n";
        if bless {
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::write(&path, &text).expect("write");
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "stale schemas {stale:?}: run FLOTILLA_BLESS=1 cargo test -p flotilla-wasm --test schema"
    );
}
