-- A step is replaced at most once: a second replacement would be a second effect.
create unique index step_replaced_once_idx on step (replaces_step_id) where replaces_step_id is not null;
