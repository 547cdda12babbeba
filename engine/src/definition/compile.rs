//! A definition file checked and compiled: what the engine runs, and every refusal a file gets
//! before anything of it is stored.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::check::{check_name, check_reads, check_step, is_template, template_error};
use super::file::{DefinitionFile, ExternalFile, StepFile};
use super::{InputError, StepSpec};
use crate::domain::InputDigest;
use crate::domain::StepKind;
use crate::domain::names::adapter_matches;
use crate::domain::words::StepWords;
use crate::file_error::FileError;
use crate::template::{self, TemplateError};

/// A step's rendered request, before its adapter shapes it for the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRequest {
    pub request: Value,
    /// The digest the destination compares under one key.
    pub content_digest: InputDigest,
}

/// A definition ready to run.
#[derive(Debug)]
pub struct Definition {
    file: DefinitionFile,
    /// The digest of the file as applied: two files with one name and version must agree.
    pub source_digest: InputDigest,
    schema: jsonschema::Validator,
    steps: Vec<StepSpec>,
}

impl Definition {
    /// Parses and checks `source`: every rule of the format, every template compiled, every
    /// field a template reads provided by the input schema or a dependency.
    pub fn from_source(source: &str) -> Result<Self, FileError> {
        let file = DefinitionFile::parse(source)?;
        Self::compile(file, InputDigest::of_bytes(source.as_bytes()))
            .map_err(|e| e.placed_in(source))
    }

    fn compile(file: DefinitionFile, source_digest: InputDigest) -> Result<Self, FileError> {
        check_name(&file)?;
        let schema = jsonschema::validator_for(&file.input_schema).map_err(|e| {
            FileError::at(
                None,
                format!("`input_schema` is not a valid JSON Schema: {e}"),
            )
        })?;
        let mut steps: Vec<StepSpec> = Vec::new();
        for step in &file.steps {
            steps.push(check_step(&file, step, &steps)?);
        }
        if steps.is_empty() {
            return Err(FileError::at(None, "a definition needs at least one step"));
        }
        for (what, read) in [
            ("subject", template::variables_of_text(&file.subject)),
            (
                "normalize",
                file.normalize
                    .as_ref()
                    .map_or(Ok(BTreeSet::new()), template::variables_of_tree),
            ),
        ] {
            let read = read.map_err(|e| template_error(what, &e))?;
            check_reads(&file, what, &read, None)?;
        }
        if let Some(retention) = &file.retention {
            crate::domain::retention::parse(&retention.settled).map_err(|e| {
                FileError::about(
                    retention.settled.clone(),
                    format!("`retention.settled`: {e}"),
                )
            })?;
        }
        if let Some(status) = &file.status_step
            && !steps.iter().any(|s| &s.logical == status)
        {
            return Err(FileError::at(
                None,
                format!("`status_step` names `{status}`, which is not a step"),
            ));
        }
        Ok(Definition {
            file,
            source_digest,
            schema,
            steps,
        })
    }

    pub fn name(&self) -> &str {
        &self.file.name
    }

    pub fn version(&self) -> i32 {
        self.file.version
    }

    pub fn description(&self) -> &str {
        &self.file.description
    }

    /// The steps, in the order the file lists them.
    pub fn steps(&self) -> &[StepSpec] {
        &self.steps
    }

    /// How long its settled workflows stay in the hot tables; `None`: the deployment's
    /// default (docs/DESIGN.md §21).
    pub fn retain_settled(&self) -> Option<std::time::Duration> {
        let retention = self.file.retention.as_ref()?;
        crate::domain::retention::parse(&retention.settled).ok()
    }

    /// The step the status page speaks of.
    pub fn status_step(&self) -> &str {
        self.file
            .status_step
            .as_deref()
            .or_else(|| {
                self.steps
                    .iter()
                    .find(|s| s.kind == StepKind::External)
                    .map(|s| s.logical.as_str())
            })
            .unwrap_or(&self.steps[0].logical)
    }

    fn step(&self, logical: &str) -> Result<&StepFile, InputError> {
        self.file
            .steps
            .iter()
            .find(|s| s.name == logical)
            .ok_or_else(|| {
                InputError::Invalid(format!(
                    "`{logical}` is not a step of {} v{}",
                    self.name(),
                    self.version()
                ))
            })
    }

    fn external(&self, logical: &str) -> Result<&ExternalFile, InputError> {
        self.step(logical)?
            .external
            .as_ref()
            .ok_or_else(|| InputError::Invalid(format!("`{logical}` is not an external step")))
    }

    /// The words people see for `logical`.
    pub fn words(&self, logical: &str) -> StepWords {
        let Ok(step) = self.step(logical) else {
            return StepWords::named(logical);
        };
        match &step.words {
            Some(w) => StepWords {
                noun: w.noun.clone(),
                service: w.service.clone(),
                waiting: w.waiting.clone(),
                in_flight: w.in_flight.clone(),
                unknown: w.unknown.clone(),
                succeeded: w.succeeded.clone(),
                review: w.review.clone(),
            },
            None => StepWords::named(logical),
        }
    }

    /// Checks `input` against the schema and normalizes it: the result is what gets digested,
    /// and it satisfies the schema too (normalizing it again gives it back).
    pub fn normalize(&self, input: &Value) -> Result<Value, InputError> {
        self.validate(input)?;
        let normalized = match &self.file.normalize {
            Some(tree) => template::render_tree(tree, &json!({ "input": input }))
                .map_err(|e| InputError::Invalid(e.to_string()))?,
            None => input.clone(),
        };
        self.validate(&normalized)?;
        Ok(normalized)
    }

    fn validate(&self, input: &Value) -> Result<(), InputError> {
        match self.schema.iter_errors(input).next() {
            None => Ok(()),
            Some(error) => {
                let path = error.instance_path().to_string();
                Err(InputError::Invalid(if path.is_empty() {
                    error.to_string()
                } else {
                    format!(
                        "`{}`: {error}",
                        path.trim_start_matches('/').replace('/', ".")
                    )
                }))
            }
        }
    }

    /// Whom the workflow acts on (authority revocations match it).
    pub fn subject(&self, input: &Value) -> Result<String, InputError> {
        let value = template::render_text(&self.file.subject, &json!({ "input": input }))
            .map_err(|e| InputError::Invalid(e.to_string()))?;
        Ok(text_of(&value))
    }

    /// The adapters the file names literally, by step: a step whose adapter is a template over
    /// the input names its adapter only when a workflow starts.
    pub fn named_adapters(&self) -> Vec<(&str, &str)> {
        self.file
            .steps
            .iter()
            .filter_map(|step| {
                let adapter = step.external.as_ref()?.adapter.trim();
                (!is_template(adapter)).then_some((step.name.as_str(), adapter))
            })
            .collect()
    }

    /// Refuses a step whose `adapter` the input chooses with no `adapters` list to choose
    /// from: a file applied now must list them, or any input could pick any adapter, with its
    /// secrets. (One stored before lists existed still compiles, for the workflows it runs,
    /// and starts no new one.)
    pub fn choices_listed(&self) -> Result<(), FileError> {
        let unlisted = self.file.steps.iter().find(|step| {
            step.external
                .as_ref()
                .is_some_and(|e| is_template(&e.adapter) && e.adapters.is_none())
        });
        match unlisted {
            None => Ok(()),
            Some(step) => Err(FileError::about(
                format!("name: {}", step.name),
                format!(
                    "step `{}` takes its adapter from the input: list the adapters it may choose (`adapters: [name, prefix-*]`), or any input could pick any adapter, with its secrets",
                    step.name
                ),
            )),
        }
    }

    /// The adapter an external step of a workflow with `input` calls: one its `adapters` list
    /// names, when the input chooses it.
    pub fn adapter_for(&self, logical: &str, input: &Value) -> Result<String, InputError> {
        let external = self.external(logical)?;
        let value = template::render_text(&external.adapter, &json!({ "input": input }))
            .map_err(|e| InputError::Invalid(e.to_string()))?;
        let chosen = text_of(&value).trim().to_owned();
        if !is_template(&external.adapter) {
            return Ok(chosen);
        }
        match &external.adapters {
            None => Err(InputError::Invalid(format!(
                "step `{logical}` takes its adapter from the input, and definition `{}` v{} was applied before definitions listed the adapters a step may choose: apply a version with `adapters:` to start it",
                self.name(),
                self.version()
            ))),
            Some(list) if list.iter().any(|p| adapter_matches(p, &chosen)) => Ok(chosen),
            Some(list) => Err(InputError::Invalid(format!(
                "step `{logical}` may call only {}; the input chose `{chosen}`",
                list.iter()
                    .map(|p| format!("`{p}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    fn context(&self, input: &Value, dependencies: &Value, key: Option<&str>) -> Value {
        json!({
            "input": input,
            "steps": dependencies,
            "key": key,
            "definition": { "name": self.name(), "version": self.version() },
        })
    }

    /// The output of the pure step `logical`.
    pub fn run_pure(
        &self,
        logical: &str,
        input: &Value,
        dependencies: &Value,
    ) -> Result<Value, InputError> {
        let pure = self
            .step(logical)?
            .pure
            .as_ref()
            .ok_or_else(|| InputError::Invalid(format!("`{logical}` is not a pure step")))?;
        let tree = Value::Object(pure.output.clone().into_iter().collect());
        template::render_tree(&tree, &self.context(input, dependencies, None))
            .map_err(|e| InputError::Invalid(e.to_string()))
    }

    /// The request of the external step `logical` under `key`.
    pub fn render_request(
        &self,
        logical: &str,
        key: &str,
        input: &Value,
        dependencies: &Value,
    ) -> Result<StepRequest, InputError> {
        let external = self.external(logical)?;
        let context = self.context(input, dependencies, Some(key));
        let invalid = |e: TemplateError| InputError::Invalid(e.to_string());
        let request = template::render_tree(&external.request, &context).map_err(invalid)?;
        let content_digest = match &external.digest {
            Some(text) => {
                let digest = text_of(&template::render_text(text, &context).map_err(invalid)?);
                InputDigest::parse(&digest).ok_or_else(|| {
                    InputError::Invalid(format!(
                        "step `{logical}`'s digest `{digest}` is not a sha256 digest"
                    ))
                })?
            }
            None => InputDigest::of_json(&request),
        };
        Ok(StepRequest {
            request,
            content_digest,
        })
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = include_str!("../../../definitions/document_delivery.v1.yaml");
    const V2: &str = include_str!("../../../definitions/document_delivery.v2.yaml");

    fn input() -> Value {
        json!({"adapter": " docs ", "recipient": "r-1", "document": {"title": " Hi ", "body": "a\r\nb"}})
    }

    fn v1() -> Definition {
        Definition::from_source(V1).unwrap()
    }

    #[test]
    fn normalization_trims_fills_defaults_and_is_stable() {
        let normalized = v1().normalize(&input()).unwrap();
        assert_eq!(normalized["adapter"], "docs");
        assert_eq!(normalized["notify_adapter"], "docs");
        assert_eq!(normalized["document"]["body"], "a\nb");
        assert_eq!(v1().normalize(&normalized).unwrap(), normalized);
    }

    #[test]
    fn an_input_the_schema_refuses_is_refused_naming_the_field() {
        let mut extra = input();
        extra["colour"] = json!("red");
        let InputError::Invalid(why) = v1().normalize(&extra).unwrap_err() else {
            panic!("expected an invalid input");
        };
        assert!(why.contains("colour"), "{why}");
        let mut blank = input();
        blank["document"]["title"] = json!("   ");
        let InputError::Invalid(why) = v1().normalize(&blank).unwrap_err() else {
            panic!("expected an invalid input");
        };
        assert!(why.starts_with("`document.title`"), "{why}");
    }

    #[test]
    fn the_same_inputs_always_render_the_same_request_and_v2_other_bytes() {
        let definition = v1();
        let normalized = definition.normalize(&input()).unwrap();
        let render = definition
            .run_pure("render", &normalized, &json!({}))
            .unwrap();
        let deps = json!({ "render": render });
        let a = definition
            .render_request("deliver", "w-1/deliver-v1", &normalized, &deps)
            .unwrap();
        let b = definition
            .render_request("deliver", "w-1/deliver-v1", &normalized, &deps)
            .unwrap();
        assert_eq!(a, b);
        let v2 = Definition::from_source(V2)
            .unwrap()
            .render_request("deliver", "w-1/deliver-v1", &normalized, &deps)
            .unwrap();
        assert_ne!(a.request, v2.request, "v2 changes the bytes");
        assert_eq!(a.content_digest, v2.content_digest);
        assert_eq!(
            a.content_digest.to_string(),
            render["document_digest"].as_str().unwrap()
        );
    }

    #[test]
    fn notify_needs_the_delivery_receipt_fields() {
        let definition = v1();
        let normalized = definition.normalize(&input()).unwrap();
        let missing = json!({ "deliver": { "external_reference": "x-1" } });
        assert!(
            definition
                .render_request("notify", "k", &normalized, &missing)
                .is_err()
        );
        let digest = InputDigest::of_bytes(b"x").to_string();
        let present = json!({ "deliver": { "external_reference": "x-1", "input_digest": digest } });
        assert!(
            definition
                .render_request("notify", "k", &normalized, &present)
                .is_ok()
        );
    }

    #[test]
    fn a_template_reading_a_field_nobody_provides_is_refused() {
        let undeclared = V1.replace("{{ input.recipient }}\"\n", "{{ input.recipent }}\"\n");
        let error = Definition::from_source(&undeclared).unwrap_err();
        assert!(error.message.contains("input.recipent"), "{error}");
        let unrequired = V1.replace(
            "requires: { deliver: [external_reference, input_digest] }",
            "requires: { deliver: [external_reference] }",
        );
        let error = Definition::from_source(&unrequired).unwrap_err();
        assert!(
            error.message.contains("steps.deliver.input_digest"),
            "{error}"
        );
    }

    #[test]
    fn a_step_may_depend_only_on_a_step_before_it() {
        let backwards = V1.replace("depends_on: [render]", "depends_on: [notify]");
        let error = Definition::from_source(&backwards).unwrap_err();
        assert!(
            error.message.contains("not a step listed before it"),
            "{error}"
        );
    }
}
