-- Two step states the trust ladder needs (docs/DESIGN.md §5), added in a migration of their
-- own: a value added to an enum cannot be used in the transaction that adds it.
--   held    a claimed step whose adapter may send nothing now (its version is not verified):
--           nothing was sent and no attempt counted; it waits until the adapter may send.
--   unsent  every attempt failed before any effect and no automatic attempt follows: nothing
--           was sent, and a person decides whether to send it again.
alter type step_state add value if not exists 'held' after 'ready';
alter type step_state add value if not exists 'unsent' after 'review_required';
