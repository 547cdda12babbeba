-- A durably rejected step waits for a person too (to replace it): the review queue lists it
-- beside unknown outcomes, ordered by when it started waiting.
drop index step_review_idx;
create index step_review_idx on step (unknown_since, id)
    where state in ('outcome_unknown', 'review_required', 'rejected');
update step set unknown_since = updated_at where state = 'rejected' and unknown_since is null;
