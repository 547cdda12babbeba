//! The checks a definition file passes before it is stored: names, step order, required fields,
//! and every field a template reads provided by the input schema or a dependency.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::StepSpec;
use super::file::{DefinitionFile, ExternalFile, StepFile};
use crate::domain::StepKind;
use crate::domain::names::{adapter_matches, is_adapter_pattern};
use crate::file_error::FileError;
use crate::template::{self, TemplateError};

/// The names every template may read besides `input.…` and `steps.…`.
const CONTEXT_NAMES: [&str; 2] = ["key", "definition"];

/// A template that does not compile (or reads what nobody provides), placed at its first line.
pub(super) fn template_error(what: &str, error: &TemplateError) -> FileError {
    let first_line = error.template.lines().next().unwrap_or_default();
    let near: String = first_line.chars().take(60).collect();
    FileError::about(near, format!("{what}: {error}"))
}

pub(super) fn check_name(file: &DefinitionFile) -> Result<(), FileError> {
    let name_ok = !file.name.is_empty()
        && file.name.len() <= 63
        && file
            .name
            .starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && file
            .name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !name_ok {
        return Err(FileError::at(
            None,
            format!(
                "`name` must be 1 to 63 lowercase letters, digits, `_` or `-`, not `{}`",
                file.name
            ),
        ));
    }
    if file.version < 1 {
        return Err(FileError::at(None, "`version` must be 1 or more"));
    }
    Ok(())
}

/// Checks one step against the steps before it (a step may depend only on earlier steps, so
/// the file's order is a topological order and no cycle can be written).
pub(super) fn check_step(
    file: &DefinitionFile,
    step: &StepFile,
    earlier: &[StepSpec],
) -> Result<StepSpec, FileError> {
    let at = |message: String| {
        FileError::about(
            format!("name: {}", step.name),
            format!("step `{}`: {message}", step.name),
        )
    };
    if earlier.iter().any(|s| s.logical == step.name) || step.name.is_empty() {
        return Err(at("the name is empty or used twice".into()));
    }
    for dependency in &step.depends_on {
        if !earlier.iter().any(|s| &s.logical == dependency) {
            return Err(at(format!(
                "depends on `{dependency}`, which is not a step listed before it"
            )));
        }
    }
    for (dependency, fields) in &step.requires {
        if !step.depends_on.contains(dependency) {
            return Err(at(format!(
                "requires fields of `{dependency}`, which it does not depend on"
            )));
        }
        if let Some(pure) = file
            .steps
            .iter()
            .find(|s| &s.name == dependency)
            .and_then(|s| s.pure.as_ref())
            && let Some(missing) = fields.iter().find(|f| !pure.output.contains_key(*f))
        {
            return Err(at(format!(
                "requires `{missing}` of `{dependency}`, whose output has no such field"
            )));
        }
    }
    let (kind, read) = match (&step.pure, &step.external) {
        (Some(pure), None) => {
            let tree = Value::Object(pure.output.clone().into_iter().collect());
            (StepKind::Pure, template::variables_of_tree(&tree))
        }
        (None, Some(external)) => {
            check_adapter_list(external).map_err(at)?;
            let mut read = template::variables_of_tree(&external.request);
            for text in [Some(&external.adapter), external.digest.as_ref()]
                .into_iter()
                .flatten()
            {
                read = read.and_then(|mut r| {
                    r.extend(template::variables_of_text(text)?);
                    Ok(r)
                });
            }
            (StepKind::External, read)
        }
        _ => return Err(at("must be exactly one of `pure` or `external`".into())),
    };
    let read = read.map_err(|e| template_error(&format!("step `{}`", step.name), &e))?;
    check_reads(file, &format!("step `{}`", step.name), &read, Some(step))?;
    let required_fields: BTreeSet<String> = step.requires.values().flatten().cloned().collect();
    Ok(StepSpec {
        logical: step.name.clone(),
        kind,
        depends_on: step.depends_on.clone(),
        required_fields: required_fields.into_iter().collect(),
        accepts_waiver: step.accepts_waiver,
    })
}

impl super::file::DefinitionFile {
    /// Every adapter a workflow of this file may call, or pattern it may choose from: each
    /// step's adapter named as such, and the `adapters` list of each step whose adapter the
    /// input chooses.
    pub fn adapters_called(&self) -> Vec<&str> {
        let externals = self.steps.iter().filter_map(|s| s.external.as_ref());
        externals
            .flat_map(|e| {
                let named = (!is_template(&e.adapter)).then_some(e.adapter.as_str());
                named
                    .into_iter()
                    .chain(e.adapters.iter().flatten().map(String::as_str))
            })
            .collect()
    }
}

/// Whether `adapter` is a template (chosen when a workflow starts) rather than a name.
pub(super) fn is_template(adapter: &str) -> bool {
    adapter.contains("{{") || adapter.contains("{%")
}

/// Refuses an `adapters` list with something that names no adapter, or one that leaves out
/// the very adapter the step names.
fn check_adapter_list(external: &ExternalFile) -> Result<(), String> {
    let Some(list) = &external.adapters else {
        return Ok(());
    };
    if list.is_empty() {
        return Err("`adapters` is empty: list the adapters `adapter` may choose".to_owned());
    }
    if let Some(bad) = list.iter().find(|p| !is_adapter_pattern(p)) {
        return Err(format!(
            "`adapters` lists `{bad}`, which is neither an adapter name nor a pattern with one `*`"
        ));
    }
    let named = external.adapter.trim();
    if !is_template(named) && !list.iter().any(|p| adapter_matches(p, named)) {
        return Err(format!(
            "names adapter `{named}`, which its own `adapters` list leaves out"
        ));
    }
    Ok(())
}

/// Refuses a template that reads what nobody provides: an input field the schema does not
/// declare, a dependency's field the step does not require, or any other name.
pub(super) fn check_reads(
    file: &DefinitionFile,
    what: &str,
    read: &BTreeSet<String>,
    step: Option<&StepFile>,
) -> Result<(), FileError> {
    for path in read {
        let mut parts = path.split('.');
        let root = parts.next().unwrap_or_default();
        let rest: Vec<&str> = parts.collect();
        let provided = match root {
            "input" => schema_provides(&file.input_schema, &rest),
            "steps" => step.is_some_and(|step| match rest.as_slice() {
                [dependency] => step.depends_on.iter().any(|d| d == dependency),
                [dependency, field, ..] => step
                    .requires
                    .get(*dependency)
                    .is_some_and(|fields| fields.iter().any(|f| f == field)),
                [] => false,
            }),
            name => step.is_some() && CONTEXT_NAMES.contains(&name),
        };
        if !provided {
            return Err(FileError::about(
                path.clone(),
                format!(
                    "{what} reads `{path}`, which {}",
                    match root {
                        "input" => "the input schema does not declare",
                        "steps" => "is not among the fields the step `requires`",
                        _ => "is not something a template can read here",
                    }
                ),
            ));
        }
    }
    Ok(())
}

/// Whether `schema` declares the property path `path` (an object without `properties`, or
/// with `additionalProperties` allowed, provides any name below it).
fn schema_provides(schema: &Value, path: &[&str]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return true;
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    match properties.and_then(|p| p.get(*first)) {
        Some(child) => schema_provides(child, rest),
        None => {
            properties.is_none() && schema.get("additionalProperties") != Some(&json!(false))
                || matches!(
                    schema.get("additionalProperties"),
                    Some(Value::Object(_)) | Some(Value::Bool(true))
                )
        }
    }
}
