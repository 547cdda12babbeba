-- Trust per claim (docs/DESIGN.md §5): what verification, or production, found of each claim
-- an adapter version makes. Only verified claims count: `adapter.contract` is the declared
-- contract cut down to them, and an outcome rule that reads an answer as `rejected` or
-- `failed_before_effect` counts only once its claim is verified.
create type claim_trust as enum ('unverified', 'verified', 'refuted');

create table adapter_claim (
    adapter    text not null references adapter (name),
    version    integer not null check (version > 0),
    -- `delivery`, `idempotency_key`, `lookup`, `withdrawal`, `deliver.outcomes[3]`,
    -- `withdraw.outcomes[0]`, `verify.provoke[1]`.
    claim      text not null check (claim ~ '^[a-z_]+(\.[a-z_]+\[[0-9]+\])?$'),
    trust      claim_trust not null,
    -- Every check that bore on the claim: [{"check", "verdict", "detail"}].
    checks     jsonb not null default '[]' check (jsonb_typeof(checks) = 'array'),
    -- What proved or refuted it (for a refuted claim, the contradiction), in one sentence.
    evidence   text not null,
    -- The sandbox verification ran against; null for a contradiction seen in production.
    against    text,
    decided_at timestamptz not null default now(),
    primary key (adapter, version, claim)
);

-- The declared contract of the current version beside the trusted one (`contract`), so the
-- trusted contract can be worked out again whenever a claim's trust changes.
alter table adapter add column declared jsonb;
update adapter a set declared = coalesce(
    (select v.contract from adapter_version v where v.name = a.name and v.version = a.contract_version),
    a.contract);
alter table adapter alter column declared set not null;

-- A version verified before claims were kept passed a suite that checked only success paths:
-- it keeps delivering, but its capabilities count again only once verification has provoked
-- their failure paths (`z29c adapter verify`).
insert into adapter_claim (adapter, version, claim, trust, evidence, against, decided_at)
select a.name, a.contract_version, 'delivery', 'verified',
       'verified before claims were kept: its contract suite passed', a.verified_against,
       coalesce(a.verified_at, now())
from adapter a
where a.verified_version = a.contract_version;

insert into adapter_claim (adapter, version, claim, trust, evidence, against)
select a.name, a.contract_version, c.claim, 'unverified',
       'verified before failure paths were provoked: run `z29c adapter verify` again', a.verified_against
from adapter a
cross join lateral (values ('idempotency_key', (a.contract ->> 'accepts_idempotency_key')::boolean),
                           ('lookup', (a.contract ->> 'query_by_client_reference')::boolean),
                           ('withdrawal', a.contract -> 'compensation' ? 'supported_with_limits')) as c(claim, declared)
where a.verified_version = a.contract_version and c.declared;

update adapter set contract = contract
    || jsonb_build_object('accepts_idempotency_key', false, 'query_by_client_reference', false,
                          'create_after_authoritative_absence', false, 'compensation', 'none');

alter table adapter drop column verified_claims;

-- The review queue's column: an unsent step waits for a person too.
drop index step_review_idx;
drop index step_waiting_counts_idx;
alter table step drop column waiting;
alter table step add column waiting step_state generated always as (
    case when state in ('outcome_unknown', 'review_required', 'unsent', 'rejected') then state end
) stored;
create index step_review_idx on step (unknown_since, id) where waiting is not null;
create index step_waiting_counts_idx on step (waiting, adapter, unknown_since, id)
    where waiting is not null;

-- Held steps, by adapter: found again when their adapter may send. A narrow table kept by the
-- statement trigger that keeps the claim queue, so no index of `step` names its state (a
-- state change stays a HOT update on the happy path).
create table step_held (
    step_id uuid primary key,
    adapter text not null
);

create index step_held_adapter_idx on step_held (adapter);

create or replace function step_changed() returns trigger language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        insert into step_state_delta (logical, state, n)
        select logical, state, count(*) from new_steps group by logical, state;
    elsif tg_op = 'DELETE' then
        insert into step_state_delta (logical, state, n)
        select logical, state, -count(*) from old_steps group by logical, state;
        delete from step_ready where step_id = any(array(select id from old_steps));
        delete from step_held where step_id = any(array(select id from old_steps));
    else
        insert into step_state_delta (logical, state, n)
        select logical, state, sum(n) from (
            select logical, state, 1 as n from new_steps
            union all select logical, state, -1 from old_steps) d
        group by logical, state having sum(n) <> 0;
        -- By key: the queue is probed for each step that stopped being claimable, never scanned.
        delete from step_ready
        where step_id = any(array(select id from new_steps
                                  where state not in ('ready', 'outcome_unknown')
                                     or lease_holder is not null));
        delete from step_held
        where step_id = any(array(select n.id from new_steps n join old_steps o on o.id = n.id
                                  where o.state = 'held' and n.state <> 'held'));
    end if;
    if tg_op <> 'DELETE' then
        insert into step_ready (step_id, run_after)
        select id, run_after from new_steps
        where state in ('ready', 'outcome_unknown') and lease_holder is null
        on conflict (step_id) do update set run_after = excluded.run_after;
        insert into step_held (step_id, adapter)
        select id, adapter from new_steps where state = 'held'
        on conflict (step_id) do nothing;
    end if;
    return null;
end
$$;
