-- Outbound limits (docs/DESIGN.md §20). An adapter file declares them; an approver's override
-- for the deployment replaces either value until it is cleared, and says who set it and why.
alter table adapter
    add column limit_requests_per_second double precision
        check (limit_requests_per_second > 0 and limit_requests_per_second <= 10000),
    add column limit_in_flight integer check (limit_in_flight between 1 and 10000),
    add column limited_by text,
    add column limited_at timestamptz,
    add column limit_reason text,
    add constraint adapter_limit_is_complete check (
        (limited_at is null) = (limited_by is null) and (limited_at is null) = (limit_reason is null)
        and (limited_at is not null or (limit_requests_per_second is null and limit_in_flight is null)));

-- Where a limited adapter's pace stands: the moment its next call may leave. One row per
-- limited adapter, locked by the claim that hands out moments, so every worker process paces
-- against the same clock.
create table adapter_pace (
    adapter text primary key references adapter (name),
    next_send_at timestamptz not null default '-infinity'
);

-- The calls of an adapter with an in-flight limit that hold a place: a place is free again
-- once its step no longer holds the lease it was admitted under (it settled, or its worker
-- died and the lease expired); the claim clears such places before it counts.
create table adapter_flight (
    adapter text not null references adapter (name),
    step_id uuid not null,
    lease_id uuid not null,
    primary key (adapter, step_id)
);
