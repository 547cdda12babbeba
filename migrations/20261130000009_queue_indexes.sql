-- The review queue's counts by state and adapter (read from the index alone), and its pages
-- filtered by state and adapter, in keyset order.
create index step_waiting_counts_idx on step (state, adapter, unknown_since, id)
    where state in ('outcome_unknown', 'review_required', 'rejected');

-- The oldest open incidents first, without aggregating all of them.
create index integrity_incident_open_age_idx on integrity_incident (opened_at, id)
    where resolved_at is null;
