-- Four eyes where money moves (docs/DESIGN.md §20). An adapter file may declare that some
-- actions on its steps need two approvers: the first proposes, with a reason; a different
-- person confirms (the action is then taken, and its waiver or authorization names the
-- proposal) or declines, before the proposal expires.
create table proposal (
    id              uuid primary key,
    step_id         uuid not null references step (id),
    action          operator_action not null check (action in ('waive', 'authorize_another_attempt', 'resolve_incident')),
    -- What the action needs besides a reason (the residual uncertainty of a waiver; the
    -- incident and the canonical result of accepting a duplicate as unresolved).
    params          jsonb not null default '{}',
    -- The person behind the proposal: an operator, or the account a token acts for.
    proposed_by     text not null,
    -- Whom the audit log names (`token:…` for a token).
    proposed_as     text not null,
    reason          text not null check (length(trim(reason)) > 0),
    -- The step's version when it was proposed: a step that moved since is not confirmed.
    step_version    bigint not null,
    proposed_at     timestamptz not null default now(),
    expires_at      timestamptz not null,
    decision        text check (decision in ('confirmed', 'declined', 'expired')),
    decided_by      text,
    decided_as      text,
    decision_reason text,
    decided_at      timestamptz,
    constraint proposal_decision_is_complete check (
        (decision is null) = (decided_at is null)
        and (decision is null or decision = 'expired' or (decided_by is not null and decision_reason is not null))),
    constraint proposal_expires_after_it_is_made check (expires_at > proposed_at)
);

-- At most one proposal waits on a step.
create unique index proposal_pending_idx on proposal (step_id) where decision is null;

-- The proposal a waiver or an authorization carried out: its proposer and reason.
alter table waiver add column proposal_id uuid references proposal (id);
alter table operator_authorization add column proposal_id uuid references proposal (id);

-- The person a token acts for, when it was issued to one: four eyes counts it as that person.
alter table api_token add column on_behalf_of text check (length(trim(on_behalf_of)) > 0);
