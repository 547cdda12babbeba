//! The published JSON Schemas of the two file formats (`schemas/`) agree with the parsers:
//! every shipped file satisfies its schema, and what the parser refuses for an unknown field
//! the schema refuses too, so an editor's validation tells a team what `z29c apply` will say.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn schema(name: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(root().join("schemas").join(name)).unwrap();
    jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
}

fn yaml_files(dir: &str) -> Vec<(PathBuf, Value)> {
    let mut files: Vec<_> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let value = serde_yaml_ng::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (p, value)
        })
        .collect()
}

fn errors(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    validator
        .iter_errors(value)
        .map(|e| e.to_string())
        .collect()
}

/// Every YAML file in `dirs` satisfies `schema`.
fn assert_every_file_satisfies(schema_file: &str, dirs: &[&str]) {
    let validator = schema(schema_file);
    let files: Vec<_> = dirs.iter().flat_map(|d| yaml_files(d)).collect();
    assert!(files.len() >= 5, "{files:?}");
    for (path, value) in files {
        assert_eq!(
            errors(&validator, &value),
            Vec::<String>::new(),
            "{}",
            path.display()
        );
    }
}

#[test]
fn every_shipped_definition_satisfies_the_published_definition_schema() {
    assert_every_file_satisfies(
        "definition.schema.json",
        &["definitions", "server/tests/server/files"],
    );
}

#[test]
fn every_shipped_adapter_satisfies_the_published_adapter_schema() {
    assert_every_file_satisfies("adapter.schema.json", &["adapters"]);
}

#[test]
fn an_unknown_field_is_refused_by_the_schema_as_by_the_parser() {
    let definitions = schema("definition.schema.json");
    let adapters = schema("adapter.schema.json");
    let (_, mut definition) = yaml_files("definitions").remove(0);
    definition["steps"][0]["retries"] = Value::from(3);
    assert!(!errors(&definitions, &definition).is_empty());
    let (_, mut adapter) = yaml_files("adapters").remove(0);
    adapter["deliver"]["timeout"] = Value::from(3);
    assert!(!errors(&adapters, &adapter).is_empty());
    let text = serde_yaml_ng::to_string(&adapter).unwrap();
    assert!(engine::adapter::AdapterSpec::parse(&text).is_err());
}
