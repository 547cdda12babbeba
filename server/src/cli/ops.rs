//! Arguments of the operator commands: the review queue, a step's evidence and the recovery
//! actions, incidents and workflows, as the console offers them. What they do is in `crate::ops`.

use clap::Subcommand;
use engine::domain::{StepState, WorkflowState};
use uuid::Uuid;

pub use super::incident::IncidentCommand;
pub use super::shared::{Acting, Output};
use crate::database::DatabaseArgs;

/// The commands that read or act on workflows, steps and incidents.
#[derive(Debug, Subcommand)]
pub enum OpsCommand {
    /// The review queue: steps whose outcome is unknown or that wait for a person, oldest
    /// uncertainty first, with the counts by state and adapter and the open incidents.
    Queue(QueueArgs),
    /// One step: its evidence, and the recovery actions.
    #[command(subcommand)]
    Step(StepCommand),
    /// Duplicate-effect incidents.
    #[command(subcommand)]
    Incident(IncidentCommand),
    /// Workflows: listed and searched, one shown, one cancelled.
    #[command(subcommand)]
    Workflow(WorkflowCommand),
    /// Bulk recovery runs.
    #[command(subcommand)]
    Bulk(BulkCommand),
    /// Stop new requests to an adapter during its provider's outage (an approver): claimed
    /// steps wait, held and unsent; calls in flight settle as they would.
    Hold(HoldArgs),
    /// Let an adapter send again (an approver): its held steps go back to the queue, oldest
    /// first, all at once or at a ramp.
    Resume(ResumeArgs),
    /// Override an adapter's outbound limits for this deployment (an approver): requests per
    /// second and calls in flight, across every worker process; `--clear` restores its file's.
    Limit(LimitArgs),
    /// Confirm or decline an action another approver proposed, where an adapter's file says it
    /// needs two (an approver other than the proposer).
    #[command(subcommand)]
    Proposal(ProposalCommand),
    /// Leave a note on a workflow, a step or an incident for the next person (an operator):
    /// shown in the timeline and the audit log; it changes no state.
    Note(NoteArgs),
}

/// `z29c note --step ID --as NAME "text"` (or `--workflow ID`, `--incident ID`).
#[derive(Debug, clap::Args)]
#[group(id = "on", required = true, multiple = false, args = ["workflow", "step", "incident"])]
pub struct NoteArgs {
    /// The note is about this workflow.
    #[arg(long, value_name = "ID")]
    pub workflow: Option<Uuid>,
    /// The note is about this step.
    #[arg(long, value_name = "ID")]
    pub step: Option<Uuid>,
    /// The note is about this incident.
    #[arg(long, value_name = "ID")]
    pub incident: Option<Uuid>,
    /// What the next person should know.
    pub text: String,
    /// The enabled operator the note is written (and audited) as.
    #[arg(long = "as", env = "Z29C_OPERATOR", value_name = "NAME")]
    pub operator: String,
    #[command(flatten)]
    pub output: Output,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

/// `z29c hold ADAPTER --as NAME --reason …`.
#[derive(Debug, clap::Args)]
pub struct HoldArgs {
    /// The adapter's name.
    pub adapter: String,
    /// Let recovery keep asking the provider about outcomes already unknown (held too by
    /// default).
    #[arg(long)]
    pub lookups_go: bool,
    #[command(flatten)]
    pub acting: Adapting,
}

/// `z29c resume ADAPTER --as NAME --reason … [--per-second N]`.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    /// The adapter's name.
    pub adapter: String,
    /// Release the held steps this many a second, oldest first (all at once by default).
    #[arg(long, value_name = "N")]
    pub per_second: Option<f64>,
    #[command(flatten)]
    pub acting: Adapting,
}

/// `z29c limit ADAPTER --as NAME --reason … [--per-second N] [--in-flight N] [--clear]`.
#[derive(Debug, clap::Args)]
#[group(id = "limit", required = true, multiple = true, args = ["per_second", "in_flight", "clear"])]
pub struct LimitArgs {
    /// The adapter's name.
    pub adapter: String,
    /// New requests a second, at most (its file's value when absent).
    #[arg(long, value_name = "N")]
    pub per_second: Option<f64>,
    /// Calls sent and not yet answered, at most (its file's value when absent).
    #[arg(long, value_name = "N")]
    pub in_flight: Option<u32>,
    /// End the override: the adapter's file's limits apply again.
    #[arg(long, conflicts_with_all = ["per_second", "in_flight"])]
    pub clear: bool,
    #[command(flatten)]
    pub acting: Adapting,
}

/// `z29c proposal confirm|decline ID --as NAME --reason …`.
#[derive(Debug, Subcommand)]
pub enum ProposalCommand {
    /// Take the proposed action, as its second approver.
    Confirm {
        /// The proposal's id (on the step's page, or `z29c step show --json`).
        id: Uuid,
        #[command(flatten)]
        acting: Adapting,
    },
    /// Decline it: nothing is done to the step.
    Decline {
        /// The proposal's id.
        id: Uuid,
        #[command(flatten)]
        acting: Adapting,
    },
}

/// Who holds, resumes or limits an adapter, or decides a proposal, and why.
#[derive(Debug, clap::Args)]
pub struct Adapting {
    /// The enabled operator (an approver) it is done and audited as.
    #[arg(long = "as", env = "Z29C_OPERATOR", value_name = "NAME")]
    pub operator: String,
    /// Why, in a sentence (recorded in the audit log and shown beside every held step).
    #[arg(long)]
    pub reason: String,
    #[command(flatten)]
    pub output: Output,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

/// `z29c bulk …`.
#[derive(Debug, Subcommand)]
pub enum BulkCommand {
    /// Stop a run: the items it has not performed are refused, and the stop is audited. Its
    /// author or an approver may stop it.
    Stop {
        /// The run's id.
        run: Uuid,
        /// The enabled operator who stops it.
        #[arg(long = "as", env = "Z29C_OPERATOR", value_name = "NAME")]
        operator: String,
        /// Why, in a sentence (recorded in the audit log and on every item left undone).
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        database: DatabaseArgs,
    },
}

impl OpsCommand {
    /// The database the command reads or acts on.
    pub fn database(&self) -> &DatabaseArgs {
        match self {
            OpsCommand::Queue(args) => &args.database,
            OpsCommand::Step(command) => command.database(),
            OpsCommand::Incident(command) => command.database(),
            OpsCommand::Workflow(WorkflowCommand::List(args)) => &args.database,
            OpsCommand::Workflow(WorkflowCommand::Show { database, .. }) => database,
            OpsCommand::Workflow(
                WorkflowCommand::Cancel { acting, .. }
                | WorkflowCommand::Pause { acting, .. }
                | WorkflowCommand::Resume { acting, .. }
                | WorkflowCommand::PauseMatching { acting, .. },
            ) => &acting.database,
            OpsCommand::Bulk(BulkCommand::Stop { database, .. }) => database,
            OpsCommand::Hold(args) => &args.acting.database,
            OpsCommand::Resume(args) => &args.acting.database,
            OpsCommand::Limit(args) => &args.acting.database,
            OpsCommand::Proposal(
                ProposalCommand::Confirm { acting, .. } | ProposalCommand::Decline { acting, .. },
            ) => &acting.database,
            OpsCommand::Note(args) => &args.database,
        }
    }
}

/// `z29c queue`: the console's review queue filters.
#[derive(Debug, clap::Args)]
pub struct QueueArgs {
    /// Only steps in this state (outcome_unknown, review_required or rejected).
    #[arg(long, value_parser = step_state)]
    pub state: Option<StepState>,
    /// Only steps of this adapter.
    #[arg(long)]
    pub adapter: Option<String>,
    /// Only steps of workflows of this definition.
    #[arg(long)]
    pub definition: Option<String>,
    /// Only steps whose uncertainty is older than this many minutes.
    #[arg(long, value_name = "MINUTES", value_parser = clap::value_parser!(u32))]
    pub older_than: Option<u32>,
    /// The most rows to print.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(i64).range(1..=500))]
    pub limit: i64,
    /// Continue after this cursor (printed as `next` by the previous page).
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<String>,
    #[command(flatten)]
    pub output: Output,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

/// `z29c step …`.
#[derive(Debug, Subcommand)]
pub enum StepCommand {
    /// The step's evidence, and the actions its contract permits now (to the operator
    /// named by `--as`, when given).
    Show {
        id: Uuid,
        /// Whose role filters the permitted actions (without it: every permitted action,
        /// with the role it needs).
        #[arg(long = "as", env = "Z29C_OPERATOR", value_name = "NAME")]
        operator: Option<String>,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Ask the destination by client reference (operator).
    Check {
        id: Uuid,
        #[command(flatten)]
        acting: Acting,
    },
    /// Send again under the same request key and digest (operator).
    Retry {
        id: Uuid,
        #[command(flatten)]
        acting: Acting,
    },
    /// Record an external reference found by other means, with the evidence (operator).
    Evidence {
        id: Uuid,
        /// The destination's reference for the effect.
        #[arg(long)]
        external_reference: String,
        /// Where and how it was found.
        #[arg(long)]
        evidence: String,
        #[command(flatten)]
        acting: Acting,
    },
    /// Accept the residual uncertainty, naming it (approver).
    Waive {
        id: Uuid,
        /// What may still be wrong, in a sentence.
        #[arg(long)]
        residual_uncertainty: String,
        #[command(flatten)]
        acting: Acting,
    },
    /// Allow one more attempt under an adapter that cannot prove the first one's outcome
    /// (approver).
    Authorize {
        id: Uuid,
        /// Acknowledge that the effect may happen twice.
        #[arg(long)]
        acknowledge_duplicate_risk: bool,
        #[command(flatten)]
        acting: Acting,
    },
    /// Stop future work; after a receipt, request withdrawal (approver).
    Cancel {
        id: Uuid,
        #[command(flatten)]
        acting: Acting,
    },
    /// Create a replacement step under a new request key (approver).
    Replace {
        id: Uuid,
        /// The workflow input the replacement runs on, as JSON (default: the same input).
        #[arg(long, value_name = "JSON")]
        corrected_input: Option<String>,
        #[command(flatten)]
        acting: Acting,
    },
}

impl StepCommand {
    fn database(&self) -> &DatabaseArgs {
        match self {
            StepCommand::Show { database, .. } => database,
            StepCommand::Check { acting, .. }
            | StepCommand::Retry { acting, .. }
            | StepCommand::Evidence { acting, .. }
            | StepCommand::Waive { acting, .. }
            | StepCommand::Authorize { acting, .. }
            | StepCommand::Cancel { acting, .. }
            | StepCommand::Replace { acting, .. } => &acting.database,
        }
    }
}

/// `z29c workflow …`.
#[derive(Debug, Subcommand)]
pub enum WorkflowCommand {
    /// Workflows, newest first, a page at a time; every filter given must hold.
    List(WorkflowListArgs),
    /// One workflow's status: its sentence and every step.
    Show {
        id: Uuid,
        #[command(flatten)]
        output: Output,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// Cancel every unsettled step, each as `step cancel` would (approver); refused, changing
    /// nothing more, at the first step its contract does not let you cancel.
    Cancel {
        id: Uuid,
        #[command(flatten)]
        acting: Acting,
    },
    /// Pause it: no step of it starts until it is resumed; calls in flight settle (operator).
    Pause {
        id: Uuid,
        #[command(flatten)]
        acting: Acting,
    },
    /// Resume a paused workflow: its held steps go back to the queue (operator).
    Resume {
        id: Uuid,
        #[command(flatten)]
        acting: Acting,
    },
    /// Pause every workflow a filter matches, as `workflow list` with the same filter shows
    /// them (at most 1,000, newest first), in one transaction (operator).
    PauseMatching {
        /// pending, running or needs_review (settled workflows have nothing left to pause).
        #[arg(long, value_parser = workflow_state)]
        state: Option<WorkflowState>,
        /// A definition's name (every version).
        #[arg(long)]
        definition: Option<String>,
        /// Workflows with a step that calls this adapter.
        #[arg(long)]
        adapter: Option<String>,
        /// Workflows created more than this many minutes ago.
        #[arg(long, value_name = "MINUTES", value_parser = clap::value_parser!(u32))]
        older_than: Option<u32>,
        #[command(flatten)]
        acting: Acting,
    },
}

/// `z29c workflow list`: the API's workflow search.
#[derive(Debug, clap::Args)]
pub struct WorkflowListArgs {
    /// pending, running, needs_review, completed or cancelled.
    #[arg(long, value_parser = workflow_state)]
    pub state: Option<WorkflowState>,
    /// A definition's name (every version).
    #[arg(long)]
    pub definition: Option<String>,
    /// Workflows with a step that calls this adapter.
    #[arg(long)]
    pub adapter: Option<String>,
    /// Workflows created more than this many minutes ago.
    #[arg(long, value_name = "MINUTES", value_parser = clap::value_parser!(u32))]
    pub older_than: Option<u32>,
    /// The client's creation key, exactly.
    #[arg(long)]
    pub creation_key: Option<String>,
    /// A step's request key, exactly.
    #[arg(long)]
    pub request_key: Option<String>,
    /// An external reference on one of the workflow's receipts, exactly.
    #[arg(long)]
    pub external_reference: Option<String>,
    /// The most rows to print.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(i64).range(1..=500))]
    pub limit: i64,
    /// Continue after this workflow id (printed as `next` by the previous page).
    #[arg(long, value_name = "CURSOR")]
    pub after: Option<Uuid>,
    #[command(flatten)]
    pub output: Output,
    #[command(flatten)]
    pub database: DatabaseArgs,
}

/// A workflow state by its snake_case name.
fn workflow_state(name: &str) -> Result<WorkflowState, String> {
    serde_json::from_value(serde_json::Value::String(name.replace('-', "_"))).map_err(|_| {
        format!(
            "`{name}` is not a workflow state: use pending, running, needs_review, completed or cancelled"
        )
    })
}

/// A step state by its snake_case name.
fn step_state(name: &str) -> Result<StepState, String> {
    serde_json::from_value(serde_json::Value::String(name.replace('-', "_"))).map_err(|_| {
        let names: Vec<String> = StepState::ALL
            .iter()
            .filter_map(|s| serde_json::to_value(s).ok())
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        format!(
            "`{name}` is not a step state: use one of {}",
            names.join(", ")
        )
    })
}
