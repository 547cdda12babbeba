-- When an operator's password was last reset (z29c user reset-password), to the second: a
-- session signed in before that second no longer stands (app::auth re-reads it per request).
alter table operator add column password_changed_at timestamptz;
