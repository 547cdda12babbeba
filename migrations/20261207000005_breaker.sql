-- An adapter's breaker (docs/DESIGN.md §20): the evidence that tripped a hold, and when the
-- adapter was last resumed (the breaker counts nothing from before it, or it would trip again
-- on the very attempts a person has just looked at).
alter table adapter
    add column held_evidence jsonb,
    add column resumed_at timestamptz;

-- The attempts that ended in trouble — outcome unknown, or a 5xx answer — by time: what a
-- breaker counts. Few in good times, so the index costs nothing on the happy path.
create index observation_trouble_idx on observation (observed_at)
    where outcome = 'outcome_unknown' or (outcome is not null and body ->> 'status' like '5%');
